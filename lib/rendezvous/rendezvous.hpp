// The rendezvous seam: how ranks learn each other's listen addresses. A
// Rendezvous owns its state and talks to the world through a Host; the world
// feeds it the rendezvous frames and link events. Implementations: the root
// star (root_star.cpp), the k-nomial tree (tree.cpp) and, when built with
// libpmix, the launcher's PMIx key-value store (pmix.cpp); selected by
// TETHER_RENDEZVOUS through make() (select.cpp). Progress thread only.
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "base/layer.hpp"
#include "base/peer_address.hpp"
#include "link/connector.hpp"
#include "wire/frame.hpp"
#include "wire/handshake.hpp"

TETHER_LAYER(4, "rendezvous");

namespace tether::rdv {

// Bring-up phases a rendezvous reports as it reaches them (the public
// InitTimings, tether/tcp_bootstrap.hpp, says what each means).
enum class Phase { HostLocal, Registered };

// The world, as a rendezvous sees it.
class Host {
 public:
  // Opens the link to `peer` at `at`, retrying until the rendezvous deadline.
  virtual void connect(int peer, const PeerAddress& at) = 0;
  // Queues a control frame on the link to `peer` (sent once it is up). The
  // payload is shared, not copied: a table sent to many ranks exists once.
  virtual void send(int peer, wire::Kind kind, wire::SharedBytes payload) = 0;
  // Closes the link to `peer` when it is idle, with the ordinary idle goodbye
  // (the link budget's close: either side may dial again later). The tree's
  // root releases its registration links this way once the table is out.
  // False (nothing done) when the link is not up and idle. Its close is
  // reported by onLinkDown (graceful).
  virtual bool release(int peer) = 0;
  // The rendezvous is complete (error == nullptr) or failed.
  virtual void finished(std::exception_ptr error) = 0;
  // Tells every connected rank to stop, naming the reason (the root, when the
  // job is misconfigured).
  virtual void abortAll(const std::string& reason) = 0;
  // Runs `fn` on the progress thread; callable from any thread (a launcher's
  // callback thread, for a rendezvous that waits on one).
  virtual void post(std::function<void()> fn) = 0;
  // This rank reached `phase` (the first report of each counts).
  virtual void phase(Phase phase) { (void)phase; }
  // How the dial to `peer` is going while it still retries ("3 attempts;
  // last: Connection refused"), for a timeout's message; empty if unknown.
  virtual std::string dialStatus(int peer) const {
    (void)peer;
    return {};
  }

 protected:
  ~Host() = default;
};

struct Config {
  int rank = 0;
  int nranks = 1;
  PeerAddress root;                   // where rank 0 listens (from the UniqueId)
  std::chrono::milliseconds timeout;  // for messages
  // For the host-local aggregation (TETHER_HOST_LOCAL): the job's secret and
  // world id (its proofs), and the loop its host-local streams run on; without
  // a loop (a simulated world) there is no aggregation.
  wire::Secret secret{};
  std::uint64_t worldId = 0;
  boost::asio::io_context* io = nullptr;
  // From the bootstrap's start: TcpOptions::rendezvousTreeRadix; from the
  // configuration read then (settings::Values): TETHER_HOST_LOCAL,
  // TETHER_LOCAL_NRANKS (0: unknown); TcpOptions::hostGroupMax.
  int treeRadix = 8;
  bool hostLocal = true;  // applies to TETHER_RENDEZVOUS=auto only (select.cpp)
  int localRanks = 0;
  int hostGroupMax = 64;
};

class Rendezvous {
 public:
  virtual ~Rendezvous() = default;
  // Starts with this rank's advertised listen address.
  virtual void start(const PeerAddress& self) = 0;
  // A rendezvous control frame from `peer`; false if the kind is not its own.
  virtual bool onFrame(int peer, wire::Kind kind, wire::SharedBytes payload) = 0;
  virtual void onLinkUp(int peer) = 0;
  virtual void onLinkDown(int peer, const std::string& reason, bool graceful) = 0;
  virtual void onConnectFailed(int peer, const link::ConnectFailure& failure) = 0;
  // A connection refused at the handshake (wrong secret, wrong world size).
  virtual void onRefused(const link::Refusal& refusal) = 0;
  // A second process claims an already connected rank.
  virtual void onDuplicateClaim(int peer, const std::string& remote) = 0;
  // The deadline passed: fail with a message that says what is missing.
  virtual void onTimeout() = 0;
  // The job was aborted while the rendezvous runs (an abort notice, or this
  // rank's abort), for `why`: a rendezvous that alone reaches some ranks (a
  // host-local group's leader) tells them why before it is destroyed.
  virtual void onAborted(const std::string& why) { (void)why; }

  virtual bool done() const = 0;
  // Every rank's address, once done.
  virtual PeerAddress address(int rank) const = 0;
};

std::unique_ptr<Rendezvous> makeRootStar(Host& host, const Config& config);
std::unique_ptr<Rendezvous> makeTree(Host& host, const Config& config, int radix);
// Ranks of one host register through their host leader (host_local.cpp);
// `localRanks`: ranks per host if known (TETHER_LOCAL_NRANKS), else 0.
std::unique_ptr<Rendezvous> makeHostLocal(Host& host, const Config& config, int localRanks);
// Host registrations the root of this process received (tests count them:
// one per host with the aggregation on).
int hostRegistrationsReceived();
// Registrations the root of this process received from ranks themselves (the
// root star and the tree: one per rank but the root's own).
int rankRegistrationsReceived();
// Address tables the root of this process sent over TCP with host-local
// aggregation: one per child of the root in the host leaders' tree.
int tablesSentByRoot();
// Defined only in a build with PMIx (TETHER_HAVE_PMIX): see havePmix().
std::unique_ptr<Rendezvous> makePmix(Host& host, const Config& config);
// This process's rank and its namespace's size from PMIx (PMIx_Init and Get;
// it stays initialized, finalized at exit). Throws Error naming the failing call;
// Error{InvalidArgument, kNoPmixText} in a build without PMIx. Blocks.
struct PmixRankSize {
  int rank = 0, size = 0;
};
PmixRankSize pmixRankAndSize();
// Whether this build has the PMIx rendezvous (libpmix-dev at configure time).
bool havePmix();
// The message of the InvalidArgument error for TETHER_RENDEZVOUS=pmix in a
// build without it.
inline constexpr const char* kNoPmixText =
    "TETHER_RENDEZVOUS=pmix: this build of tether has no PMIx (libpmix-dev missing at configure time)";

// The k-nomial tree rooted at rank 0 that the tree rendezvous uses.
int treeParent(int rank, int radix);
std::vector<int> treeChildren(int rank, int nranks, int radix);

// The tree is chosen by "auto" from this many ranks, where the root star's root
// would hold 128 sockets (docs/benchmarks.md, "Scale": the tree saves the
// root's sockets; it was not measured faster on a 2-core machine).
inline constexpr int kTreeFromRanks = 128;
inline constexpr int kDefaultTreeRadix = 8;

// The rendezvous named `name` ("root", "tree", "pmix" or "auto"; TETHER_RENDEZVOUS);
// the tree's radix from config.treeRadix. Throws Error{InvalidArgument}
// naming the value and the choices.
std::unique_ptr<Rendezvous> make(Host& host, const Config& config, std::string_view name);

}  // namespace tether::rdv
