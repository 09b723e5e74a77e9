// The world: one per TcpBootstrap world communicator (children share it).
// Owns the progress thread and its io_context, the listener, one Link per
// peer, the mailbox and the rendezvous state. Everything below "progress
// thread" runs only on that thread, so it needs no locks.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/completion.hpp"
#include "core/driver.hpp"
#include "core/op.hpp"
#include "match/mailbox.hpp"
#include "tether/error.hpp"
#include "wire/handshake.hpp"

namespace tether {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
class Link;

struct WorldConfig {
  int rank = 0;
  int nranks = 1;
  wire::Secret secret{};
  std::uint64_t worldId = 0;
  tcp::endpoint root;
  std::chrono::milliseconds timeout{300000};
  std::chrono::milliseconds handshakeTimeout{10000};
  std::uint64_t maxPayload = 1ULL << 30;
  std::size_t eagerBytes = 64 * 1024;  // sends up to this size are copied and forgotten
  std::string listenHost;
  std::string advertise;
  std::function<std::string(const std::string&)> advertiseFor;
  int keepaliveIdleS = 10, keepaliveIntervalS = 2, keepaliveCount = 3;
};

// Where an arriving data frame's payload goes.
struct Target {
  enum class Where { Posted, Stash, Discard } where = Where::Discard;
  void* buf = nullptr;
  Op* op = nullptr;
};

class World {
 public:
  // Starts the progress thread and completes the rendezvous; throws on failure.
  static std::shared_ptr<World> create(WorldConfig config);
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  const WorldConfig& config() const { return cfg_; }
  int rank() const { return cfg_.rank; }
  int nranks() const { return cfg_.nranks; }
  // After rendezvous: immutable.
  const std::vector<PeerAddress>& table() const { return table_; }
  asio::io_context& io() { return io_; }

  // ---- calling threads ----
  // Runs `body` as a coroutine on the progress thread and waits for it, at
  // most until `deadline`; on expiry the operation is cancelled with a Timeout
  // naming what it still waited for. Rethrows the operation's error.
  void run(const std::shared_ptr<Op>& op,
           std::function<asio::awaitable<void>(Op&)> body,
           std::chrono::steady_clock::time_point deadline);
  // Thread-safe. origin = the rank that decided to abort.
  void abort(int origin, const std::string& reason);

  // ---- progress thread ----
  // Queue a frame to world rank `dst` (dialling it if needed). With
  // `reference`, the payload is not copied and `op` waits until it is written.
  void sendFrame(Op& op, int dst, const wire::FrameHeader& h, const void* payload, bool reference);
  // Post a receive under key (src is a world rank).
  void postRecv(Op& op, const match::Key& key, void* buf, std::size_t len);
  // Waits until everything the op posted is done, or rethrows its error.
  asio::awaitable<void> settle(Op& op);
  void failOp(Op& op, std::exception_ptr e);
  void finishOp(Op& op);  // checks for leftover frames of a collective
  void completeReferencedSend(Op& op);
  // A link finished (or gave up) a transfer of a failed op's buffer.
  void releaseDrain(Op& op);

  // Link callbacks.
  bool shuttingDown() const { return shuttingDown_; }
  void linkIdle() { if (shuttingDown_) onLinkIdle(); }
  Target onDataHeader(Link& link, const wire::FrameHeader& h);
  void onDataComplete(Link& link, const wire::FrameHeader& h, const Target& t,
                      std::vector<unsigned char>&& stashed);
  void onControlFrame(Link& link, const wire::FrameHeader& h, std::vector<unsigned char>&& payload);
  void onLinkDown(Link& link, const std::string& reason, bool graceful);

  // Handshake results (lib/link/handshake_io.cpp).
  // Decides whether an authenticated incoming link from `peer` is accepted;
  // returns nullopt when accepted, else the reject to send.
  std::optional<wire::Reject> admit(int peer, const wire::Hello& hello, const std::string& remote);
  void attach(int peer, tcp::socket socket, bool dialedByUs);
  void onDialFailed(int peer, const std::string& reason, bool final);

  // Collective bookkeeping: the collective id now running on communicator `comm`.
  void setCurrentCollective(std::uint64_t comm, std::uint64_t coll, Op* op);
  std::string describeRank(int worldRank) const;

 private:
  explicit World(WorldConfig config);
  void start();
  void shutdown();

  asio::awaitable<void> acceptLoop();
  asio::awaitable<void> serveIncoming(tcp::socket socket, tcp::endpoint from);
  asio::awaitable<void> dialPeer(int peer, tcp::endpoint ep, bool retryRefused);
  std::shared_ptr<Link> linkFor(int peer);

  // Rendezvous (lib/rendezvous/rendezvous.cpp).
  void startRendezvous();
  void onRegister(int peer, const wire::Register& r);
  void onTable(int peer, std::vector<PeerAddress> table);
  void finishInit(std::exception_ptr e);

  void abortOnProgress(int origin, const std::string& reason, bool notifyPeers);
  void abortAfterFailedCollective(std::exception_ptr e);
  Error abortedError(const std::string& opName) const;
  void sendControl(Link& link, wire::Kind kind, const std::vector<unsigned char>& payload);
  void wake(Op& op);
  void deliverLocal(const wire::FrameHeader& h, const void* payload);
  bool deliverToPosted(int src, const wire::FrameHeader& h, const unsigned char* payload);
  Error protocolError(const std::string& what) const;
  void reportProtocol(std::uint64_t comm, const Error& e);
  void checkStashedAgainst(Op& op);
  void onLinkIdle();
  std::string rendezvousTimeoutText() const;
  void failOpsOfPeer(int peer, const Error& e);
  Error peerGoneError(int peer, const std::string& opName) const;
  std::string pendingDescription(const Op& op) const;

  WorldConfig cfg_;
  asio::io_context io_{1};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  Driver driver_{io_};  // runs io_: the calling thread during a call, else a background thread
  tcp::acceptor acceptor_;

  // Progress-thread state.
  std::vector<std::shared_ptr<Link>> links_;
  struct PeerState {
    bool gone = false;      // link closed for good
    bool graceful = false;  // the peer said goodbye
    std::string reason;
  };
  std::vector<PeerState> peers_;
  match::Mailbox mailbox_;
  std::unordered_set<Op*> activeOps_;
  struct CommState {
    std::uint64_t current = 0;  // collective id running or last run
    Op* op = nullptr;           // the running collective, if any
    std::exception_ptr poison;  // a protocol error seen while no collective ran
  };
  std::unordered_map<std::uint64_t, CommState> comms_;
  bool shuttingDown_ = false;
  bool initComplete_ = false;
  bool initOk_ = false;
  bool abortHandled_ = false;
  std::optional<asio::steady_timer> drainTimer_;  // shutdown waits on it

  // Rendezvous.
  std::vector<std::optional<PeerAddress>> registered_;
  int registeredCount_ = 0;
  std::vector<PeerAddress> table_;
  PeerAddress self_;
  Completion initDone_;

  // Abort state, readable from calling threads.
  std::atomic<bool> aborted_{false};
  mutable std::mutex abortMutex_;
  int abortOrigin_ = -1;
  std::string abortReason_;

  friend class Link;
};

}  // namespace tether
