// The world: one per TcpBootstrap world communicator (children share it);
// the composition root of the core units. It owns the event loop and who runs
// it (Driver), the listener and connector, and is the links' LinkSink; the
// links, epochs and rules R1-R8 are the LinkTable's (World acts on its
// decisions: dials, the budget), the connector's questions LinkAdmission's,
// the rendezvous' view of the links RendezvousHost's; the operations are the
// OpTable's, the collective sequences the SequenceGuard's, the join and close
// states the Lifecycle's, the abort state and where notices go the
// AbortChannel's and AbortRelay's, who is behind a timeout (and the answer to
// a peer's question) the StallProbe's.
// World implements the small interfaces those units see the links through
// (TransferView, NoticeLinks). Everything below "progress thread" runs only
// on the thread that runs the event loop, so it needs no locks. Files:
// world.cpp (lifecycle, calls, abort), world_links.cpp (links and control
// frames), world_ops.cpp (where operations meet links).
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
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/descriptors.hpp"
#include "base/endpoint.hpp"
#include "base/layer.hpp"
#include "core/abort_channel.hpp"
#include "core/admission.hpp"
#include "core/await_watch.hpp"
#include "core/abort_relay.hpp"
#include "core/bring_up.hpp"
#include "core/completion.hpp"
#include "core/driver.hpp"
#include "core/lifecycle.hpp"
#include "core/link_table.hpp"
#include "core/observe.hpp"
#include "core/op.hpp"
#include "core/sequence.hpp"
#include "core/observer_desk.hpp"
#include "core/op_table.hpp"
#include "core/payload_pool.hpp"
#include "core/post_slot.hpp"
#include "core/send_window.hpp"
#include "core/sequence_guard.hpp"
#include "core/stall_probe.hpp"
#include "link/connector.hpp"
#include "link/link.hpp"
#include "match/mailbox.hpp"
#include "rendezvous/rendezvous.hpp"
#include "tether/bootstrap.hpp"
#include "tether/error.hpp"
#include "wire/handshake.hpp"

TETHER_LAYER(6, "core");

namespace tether {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

struct WorldConfig {
  int rank = 0;
  int nranks = 1;
  wire::Secret secret{};
  std::uint64_t worldId = 0;
  tcp::endpoint root;
  std::chrono::milliseconds timeout = kDefaultTimeout;
  std::chrono::steady_clock::time_point began{};  // the rendezvous deadline counts from here (unset: create())
  std::chrono::milliseconds handshakeTimeout{10000};
  std::uint64_t maxPayload = 1ULL << 30;
  std::size_t eagerBytes = 64 * 1024;  // sends up to this size are copied and forgotten
  // Point-to-point bytes (payload + SendWindow::kMessageCost each) sent to
  // one peer and not yet received there; past it sends wait (TETHER_P2P_WINDOW_BYTES).
  std::uint64_t p2pWindow = 4ULL << 20;
  std::string listenHost;
  std::string advertise;
  std::function<std::string(const std::string&)> advertiseFor;
  int keepaliveIdleS = 10, keepaliveIntervalS = 2, keepaliveCount = 3;
  // Open links (current and lingering) above which the least recently used
  // idle link is closed (TETHER_MAX_LINKS); a soft budget.
  int maxLinks = 64;  // why 64: docs/benchmarks.md, "Scale"
  int maxDials = 32;  // dials in flight (TcpOptions::maxDials)
  // From the configuration read when the bootstrap started (settings::Values):
  // a variable changed later is not seen (docs/configuration.md, "Read once").
  std::string rendezvous = "auto";  // TETHER_RENDEZVOUS
  int rendezvousTreeRadix = 8;      // TcpOptions::rendezvousTreeRadix
  bool hostLocal = true;            // TETHER_HOST_LOCAL (with rendezvous "auto")
  int localRanks = 0;               // TETHER_LOCAL_NRANKS, else the launcher's local size; 0: unknown
  int hostGroupMax = 64;            // TcpOptions::hostGroupMax
  int pollUs = 50;                  // TcpOptions::pollUs (0: never poll)
  std::string hostId;               // TETHER_HOST_ID (empty: host name and boot id, thisHostId)
  InterfaceFilter interfaces;       // TETHER_SOCKET_IFNAME, TETHER_SOCKET_FAMILY
};

class World final : link::LinkSink, TransferView, NoticeLinks {
 public:
  using Clock = std::chrono::steady_clock;
  using Body = std::function<asio::awaitable<void>(Op&)>;

  // Starts the event loop and completes the rendezvous; throws on failure.
  static std::shared_ptr<World> create(WorldConfig config);
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  // Made in a process that forked after this world started (docs/faults.md,
  // "After fork"): the child's copy is inert. Its calls fail (checkProcess),
  // it sends nothing and waits for nothing, and its last reference closes its
  // copies of the world's sockets and leaks the rest (the threads, locks and
  // event loop it would tear down are the parent's).
  bool forked() const { return fds::processId() != creator_; }
  // Throws Error{InvalidArgument} naming both processes when forked().
  void checkProcess(const std::string& opName) const;

  const WorldConfig& config() const { return cfg_; }
  int rank() const { return cfg_.rank; }
  int nranks() const { return cfg_.nranks; }
  // After the rendezvous: every rank's advertised address (immutable).
  PeerAddress address(int rank) const { return rendezvous_->address(rank); }
  const Topology& topology() const { return topology_; }

  // ---- calling threads ----
  // Starts `body` as the op's coroutine; its end is reported on the result.
  std::shared_ptr<Completion> start(const std::shared_ptr<Op>& op, Body body);
  // start() for an operation without a coroutine (CollectiveRun): on the
  // progress thread the op is registered and `run` resumed with nullptr, or,
  // if the world aborted meanwhile, with that error (the op not registered).
  // The post's memory is `slot`'s.
  void startRun(Op& op, Resumable& run, PostSlot& slot);
  // The op's work returned (e == nullptr) or threw: it ends, and `done`
  // completes with e once no link uses its buffers.
  void finishOp(Op& op, std::exception_ptr e, const std::shared_ptr<Completion>& done);
  // Waits for `done` (runs the event loop meanwhile, or sleeps while another
  // thread runs it) until `deadline`; at the deadline the op fails with a
  // Timeout naming what it still waited for. Rethrows the op's error.
  void wait(const std::shared_ptr<Op>& op, Completion& done, Clock::time_point deadline);
  // A test: progress on this thread, sleeping briefly when tests stop making
  // any (never past `deadline`; Driver::poll). True if `done`.
  bool poll(Completion& done, Clock::time_point deadline = Clock::time_point::max()) {
    return driver_.poll(done, deadline);
  }
  // A nonblocking call's deadline (any thread): at `deadline` the operation
  // fails with Timeout naming whom it waits for, as a blocking call does,
  // whether or not anybody waits for it then.
  void expireAt(const std::shared_ptr<Op>& op, Clock::time_point deadline);
  // Ends `op` with Error{Aborted} "cancelled on this rank" if it can still be
  // withdrawn (Request::cancel, tether/request.hpp): a receive not yet
  // matched, or a collective (on the world communicator the peers then get an
  // abort notice). Waits for the progress thread's answer; true if cancelled.
  bool cancel(const std::shared_ptr<Op>& op);
  // Thread-safe. origin = the rank that decided to abort.
  void abort(int origin, const std::string& reason);
  // A communicator's collective sequence, checked against arriving frames.
  void addCommunicator(std::uint64_t comm, std::shared_ptr<CollectiveSeq> seq);
  void removeCommunicator(std::uint64_t comm);
  // Orderly close (idempotent): goodbye to every open link, wait for the
  // peers to confirm while they keep confirming — until `drain` passes with
  // no link closing, or `limit` in all — then close. False if some did not.
  bool close(std::chrono::milliseconds drain, std::chrono::milliseconds limit);
  bool closed() const { return closed_.load(); }
  // Bring-up phases and the links' counts (observe.hpp); any thread.
  InitTimings initTimings() const { return init_.timings(); }
  const LinkCounters& linkCounters() const { return links_; }

  // ---- progress thread: what operations do ----
  // Queues a frame to world rank `dst` (dialling it if needed). With
  // `reference`, a large payload is not copied and `op` waits until it is written.
  void sendFrame(Op& op, int dst, const wire::FrameHeader& h, const void* payload, bool reference);
  // Posts a receive under `key` (key.src is a world rank).
  void postRecv(Op& op, const match::Key& key, void* buf, std::size_t len);
  // Waits until everything the op posted is done, or rethrows its error.
  asio::awaitable<void> settle(Op& op) { return ops_.settle(op); }
  // settle() for a run without a coroutine (OpTable::settleOrResume).
  bool settleOrResume(Op& op, Resumable& run) { return ops_.settleOrResume(op, run); }
  // The op starts as collective op.coll of `seq`'s communicator.
  void beginCollective(CollectiveSeq& seq, Op& op);
  // "rank 3 (10.0.0.7:41235)".
  std::string describeRank(int worldRank) const override;

 private:
  explicit World(WorldConfig config);
  // The last reference's end: ~World, or in a forked child abandon().
  static void release(World* w);
  // A forked child's copy: closes (close(2) only) the sockets this world
  // opened, and nothing else; the object is leaked.
  void abandon();
  void start();
  void checkStart(const Op& op) const;
  void finishInit(std::exception_ptr e);
  asio::awaitable<void> runOp(std::shared_ptr<Op> op, Body body, std::shared_ptr<Completion> done);
  void learnTopology();
  void shutdownOnProgress(const std::shared_ptr<Completion>& done, std::chrono::milliseconds drain,
                          std::chrono::milliseconds limit);
  void armDrain(const std::shared_ptr<Completion>& done, std::chrono::milliseconds drain);

  // link::LinkSink
  link::Target onDataHeader(link::Link& link, const wire::FrameHeader& h, bool mayWait) override;
  void onDataComplete(link::Link& link, const wire::FrameHeader& h, const link::Target& t,
                      std::vector<unsigned char>&& stashed) override;
  void onControlFrame(link::Link& link, const wire::FrameHeader& h, std::vector<unsigned char>&& payload) override;
  void onLinkDown(link::Link& link, const std::string& reason, bool graceful) override;
  void onTransferDone(link::Owner& owner, bool abandoned) override;
  void onLinkIdle(link::Link& link) override;
  // link::LinkSink (the lingering close)
  void onGoodbye(link::Link& link, wire::GoodbyeMode mode) override;
  // Links (world_links.cpp); the LinkTable holds them and decides by R1-R8.
  std::shared_ptr<link::Link> linkFor(int peer);
  void dial(int peer);
  void dialIfStillAwaited(int peer);
  // Counts a dial to `peer` (a re-dial if it had a link before).
  void countDial(int peer);
  // Closes the least recently used idle link if the budget is reached.
  void enforceBudget();
  void sendControl(link::Link& link, wire::Kind kind, const std::vector<unsigned char>& payload);
  // To `peer` over its current link, dialling if needed; false if it is gone.
  bool sendControlTo(int peer, wire::Kind kind, const std::vector<unsigned char>& payload);
  void checkDrained();

  // Operations (world.cpp, world_ops.cpp).
  void endOp(Op& op, std::exception_ptr& e);
  // Fails the ops that cannot complete now that `link` to `peer` closed:
  // those with frames still queued on it, and, if the peer is gone, those
  // waiting for it (or, unless it left in order, having it as a member).
  void failOpsOfPeer(int peer, bool gone, bool graceful, link::Link& link);
  // TransferView
  int abandonTransfers(Op& op) override;
  void unparkAll() override;
  int queuedFor(const Op& op) const override;
  std::string windowNote(const Op& op) const override;
  void p2pReceived(int src, std::uint64_t bytes) override;
  // `peer` returned credit: the sends waiting for it go (world_ops.cpp).
  void onCredit(int peer, std::uint64_t bytes);
  // Ends the sends the window still holds (the bootstrap closes).
  void failHeldSends();

  // A peer's stall probe asks where this rank is (world_links.cpp).
  void answerStatus(link::Link& link, const wire::StatusQuery& q);
  // What an observer (tether-status) is told (world_links.cpp).
  ObserverDesk::Answers observerAnswers();

  // Abort.
  // `from`: the rank whose notice this is (-1: decided here).
  void abortOnProgress(const wire::AbortNotice& n, bool notifyPeers, int from = -1);
  void abortAfterFailedCollective(std::exception_ptr e);
  Error abortedError(const std::string& opName) const { return abort_.abortedError(opName); }
  // NoticeLinks
  std::vector<int> openPeers() const override;
  void sendOpen(int peer, const std::vector<unsigned char>& payload) override;
  void sendDialling(int peer, const std::vector<unsigned char>& payload) override;
  bool departed(int peer) const override;
  Error peerGoneError(int peer, const std::string& opName) const;

  WorldConfig cfg_;
  InitClock init_{cfg_.began};  // bring-up phases (any thread)
  LinkCounters links_;          // dials, re-dials, budget closes (any thread)
  const pid_t creator_ = fds::processId();
  asio::io_context io_{1};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  // The operations in flight and their mailbox; the collective sequences.
  OpTable ops_{cfg_.rank, *this};
  SequenceGuard sequences_{cfg_.rank, ops_};
  SendWindow window_{cfg_.p2pWindow};  // point-to-point messages a peer has not received
  PayloadPool payloads_;  // the copies of small frames
  // Runs io_: the calling thread during a call, else a background thread;
  // after each handler it resumes the operations that handler woke (never on
  // a link's stack, never mid-frame).
  Driver driver_{io_, cfg_.pollUs, [this] { ops_.resumeWoken(); }};
  std::shared_ptr<link::Listener> listener_;
  LinkAdmission admission_;  // the connector's questions, from the table's rules
  link::Connector connector_;
  RendezvousHost host_;  // the rendezvous' links
  std::unique_ptr<rdv::Rendezvous> rendezvous_;
  PeerAddress self_;
  Topology topology_;

  // Progress-thread state.
  LinkTable table_;                               // current and lingering links, epochs, what each peer did
  Lifecycle life_;                                // joining, then closing: named states
  std::optional<asio::steady_timer> drainTimer_;  // close() waits on it
  Completion initDone_;

  // Abort state (readable from calling threads) and where notices go.
  AbortChannel abort_;
  AbortRelay relay_{cfg_.rank, cfg_.nranks, abort_, *this};
  StallProbe probe_;
  ObserverDesk desk_{io_, cfg_.rank, cfg_.handshakeTimeout, observerAnswers()};  // tether-status's questions
  std::string lastError_;  // the last error a call here ended with (an observer is told)
  AwaitWatch awaitWatch_;  // dials a peer awaited without a link (its loss shows at once)
  std::atomic<bool> closed_{false};
};

}  // namespace tether
