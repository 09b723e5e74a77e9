// tether/tcp_bootstrap.hpp — the TCP implementation of tether::Bootstrap.
//
// Each rank keeps at most one long-lived TCP stream per peer, opened lazily on
// first use and kept for the life of the communicator (child communicators from
// split() share it). Every frame names its operation (communicator, collective
// id, step, tag, length) and receivers match on the full key, so payloads can
// never be swapped between operations. See docs/design.md.
//
// Threading: one event loop per TcpBootstrap world runs all socket I/O. A
// blocking call runs it on the calling thread until the call is done or its
// deadline passes (sleeping in the kernel; where this host has a core per
// rank, polling briefly first, TcpOptions::pollUs); between calls a background
// thread per world runs it.
// Point-to-point calls are thread-safe; collectives of one communicator must be
// called from one thread at a time, in the same order on every rank.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "tether/bootstrap.hpp"
#include "tether/unique_id.hpp"

namespace tether {

class Communicator;  // internal (lib/core/communicator.hpp)

struct TcpOptions {
  // Deadline for construction (rendezvous) and for each blocking call.
  // Zero means the default: TETHER_TIMEOUT_MS, else kDefaultTimeout (300 s).
  // Negative: the constructor throws Error{InvalidArgument}.
  std::chrono::milliseconds timeout{0};
  // Address to listen on for peers; empty: chosen by TETHER_SOCKET_IFNAME /
  // TETHER_SOCKET_FAMILY, falling back to the root's address family.
  std::string listenHost;
  // "host:port" to register with the root instead of the real listener address
  // (tests put a proxy there). Empty: the listener's own address.
  std::string advertise;
  // Called once with the listener's real "host:port" before registration; its
  // result is advertised instead (tests start a proxy in front of the listener
  // here). Takes precedence over `advertise`.
  std::function<std::string(const std::string& listenHostPort)> advertiseFor;

  // Limits of this bootstrap (docs/configuration.md, "Expert"). 0 takes the
  // variable named (else its default) or the default given; another value out
  // of the range: the constructor throws Error{InvalidArgument} naming the field.
  int maxLinks = 0;                   // soft budget of open links (TETHER_MAX_LINKS, 64)
  int maxDials = 0;                   // dials in flight, [1, 1048576] (32)
  std::uint64_t maxPayloadBytes = 0;  // largest data frame accepted (TETHER_MAX_PAYLOAD_BYTES, 1 GiB)
  // A connection must finish its handshake this long after it began
  // (TETHER_HANDSHAKE_TIMEOUT_MS, 10 s). Negative: InvalidArgument.
  std::chrono::milliseconds handshakeTimeout{0};
  // TCP keepalive: idle seconds before the first probe, seconds between
  // probes, unanswered probes before a peer is lost; 0: from
  // TETHER_LIVENESS_S (16 s: 10, 2, 3).
  int keepaliveIdleS = 0, keepaliveIntervalS = 0, keepaliveCount = 0;
  // Sends up to this many bytes return at once (written, or copied when they
  // must wait behind other frames); larger ones are sent from the caller's
  // buffer, which the call holds until they are written (0: 64 KiB; no
  // variable). Either waits while the peer has not received
  // TETHER_P2P_WINDOW_BYTES of this rank's messages (docs/design.md,
  // "Bounded point-to-point").
  std::size_t eagerBytes = 0;
  // Where this host runs no more ranks of the world than it has cores, a
  // blocking call polls the event loop this many microseconds before it
  // sleeps (docs/design.md, "Threading"); -1: 50; 0: never; at most 1000000.
  int pollUs = -1;
  // Host-local aggregation (docs/scale.md): ranks of one host meet in groups
  // of at most this many, [2, 1024] (0: 64).
  int hostGroupMax = 0;
  // Radix of the rendezvous' k-nomial tree (TETHER_RENDEZVOUS=tree, and the
  // host leaders' tree), [2, 1048576] (0: 8).
  int rendezvousTreeRadix = 0;
};

// When this rank's world came up (TcpBootstrap::initTimings()). Each phase is
// an offset on the steady clock from the constructor's entry (whose wall-clock
// time is `started`); a phase that does not happen under the rendezvous in
// use, or has not happened yet, is std::nullopt (absent, never zero).
// docs/troubleshooting.md, "Slow start-up", says how to read them.
struct InitTimings {
  std::chrono::system_clock::time_point started;  // wall clock at the constructor's entry
  // The listener is open (the root: at the UniqueId's address).
  std::optional<std::chrono::microseconds> listen;
  // Host-local aggregation only (TETHER_RENDEZVOUS=auto): a leader has its
  // whole host group; a member has handed its registration to its leader.
  // Rank 0 registers itself: it may be absent there, when the table was out
  // before rank 0 met its host's leader.
  std::optional<std::chrono::microseconds> hostLocal;
  // This rank's registration left for the root: rank 0 registers itself at
  // once; another rank when its link to the root came up with the
  // registration queued (a host leader: with its group's). Absent for a
  // host-local member (its leader registers it) and under PMIx.
  std::optional<std::chrono::microseconds> registered;
  // The rendezvous is complete: the address table is here (the root: every
  // rank registered and the table is out).
  std::optional<std::chrono::microseconds> tableReceived;
  // The first link opened (dialled or accepted) after the table: links open
  // lazily, so this comes with the first call that needs a new peer — often
  // after the constructor returned — and stays absent while every call uses
  // links opened while this rank joined (the rendezvous', or a peer's dial
  // that came before this rank's table).
  std::optional<std::chrono::microseconds> firstLink;
  // The constructor returned (the world is joined).
  std::optional<std::chrono::microseconds> total;
};

// What a communicator did (TcpBootstrap::counters()), counted since it was
// made; always on (relaxed atomic increments, nothing locked or allocated in
// the frame path; cost: docs/benchmarks.md, "Counters").
struct Counters {
  // Calls started on this communicator, blocking and nonblocking alike (an
  // iallgather is an allgather); a call refused with InvalidArgument before it
  // started is not counted. subsetBarrier: barrier(ranks); split: split() and
  // splitByNode().
  std::uint64_t allgather = 0, alltoall = 0, alltoallv = 0, broadcast = 0, barrier = 0, subsetBarrier = 0, split = 0;
  std::uint64_t send = 0, recv = 0;
  // Data frames of this communicator (the frame header names it) this rank
  // handed to its links, and read from them and taken by a call (one that
  // no call takes, after its call failed, is not counted), with their
  // payload bytes (headers not included). A rank's frames to itself never reach a link and
  // are not counted; neither are control frames (abort, credit, status),
  // which belong to no communicator.
  std::uint64_t framesSent = 0, bytesSent = 0, framesReceived = 0, bytesReceived = 0;
  // Calls of this communicator that ended with Error{Timeout}, and with
  // Error{Aborted} (an abort, a peer's notice, a cancelled request).
  std::uint64_t timeouts = 0, aborts = 0;
  // Of the world, not of one communicator: the links are shared by every
  // communicator of a world (split() children included), so every
  // communicator of the world reports the same values. Dials started (the
  // rendezvous' included), those to a peer this rank had a link to before
  // (re-dials: after the link budget or the peer closed it, it broke, or a
  // crossed dial set it aside),
  // and links this rank closed to stay within the link budget (TETHER_MAX_LINKS).
  std::uint64_t dials = 0, redials = 0, budgetCloses = 0;
};

class TcpBootstrap : public Bootstrap {
 public:
  // A new id whose root address is this host (interface chosen as for
  // listenHost) with a port bound now and kept bound (not listening), so the
  // rank 0 created in this process or a forked child adopts it without a race,
  // and a rank 0 in a fork+exec'd child binds the same port itself.
  static UniqueId createUniqueId();
  // A new id for a given root "host:port" (IPv6 as "[addr]:port"); port 0 binds
  // a free port as above.
  static UniqueId createUniqueId(const std::string& rootHostPort);
  // An id derived from "host:port" alone (TETHER_ROOT, MASTER_ADDR/MASTER_PORT):
  // the secret comes from TETHER_SECRET when set, else from the address and
  // the job ids in the environment (TETHER_JOB_ID, TORCHELASTIC_RUN_ID,
  // SLURM_JOB_ID and SLURM_STEP_ID, PMIX_NAMESPACE, OMPI_MCA_ess_base_jobid) —
  // it then keeps two jobs at one address apart, but does not guard against
  // strangers (docs/security.md).
  static UniqueId uniqueIdFromRoot(const std::string& rootHostPort);
  // Closes the socket createUniqueId() reserved in this process, for a
  // launcher that started the ranks and does not run rank 0 itself (optional:
  // it only frees the port in the launcher).
  static void forgetUniqueId(const UniqueId& id);

  // Joins the world: registers with the root (rank 0 serves it), learns every
  // peer's address, returns when all `nranks` ranks have registered.
  TcpBootstrap(int rank, int nranks, const UniqueId& id, const TcpOptions& options = {});
  // Rank, size and root from the launch environment (docs/configuration.md).
  static std::unique_ptr<TcpBootstrap> fromEnvironment(const TcpOptions& options = {});

  // Flushes pending sends, says goodbye to connected peers, closes the links
  // (unless a child communicator still uses them). Waits for the peers'
  // confirmations while they keep coming — until 5 s (or the timeout, if
  // shorter) pass with none, and at most the communicator's timeout.
  // In a process forked after the bootstrap started, every call fails with
  // Error{InvalidArgument}, and the destructor (or close()) only closes the
  // child's copies of the sockets: it sends nothing and waits for nothing
  // (docs/faults.md, "After fork, exec and signals").
  ~TcpBootstrap() override;

  // Leaves the job now instead of in the destructor, and never throws:
  // flushes pending sends, says goodbye and waits at most `timeout` for the
  // peers to confirm (0: as the destructor does); peers that aborted or are
  // gone are not waited for.
  // Returns true when every connected peer confirmed. Closes the links that
  // this communicator shares with its children and parent: every later call
  // on any of them fails with InvalidArgument ("the bootstrap was closed").
  // A second call returns at once. A negative timeout is taken as 0.
  bool close(std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) noexcept;
  TcpBootstrap(const TcpBootstrap&) = delete;
  TcpBootstrap& operator=(const TcpBootstrap&) = delete;

  int rank() const override;
  int size() const override;
  int worldRank() const override;
  int nranksPerNode() const override;
  int localRank() const override;
  int nodeId() const override;
  int nnodes() const override;
  std::string peerHost(int peer) const override;
  std::string peerAddress(int peer) const override;
  void send(const void* data, std::size_t bytes, int peer, int tag) override;
  void recv(void* data, std::size_t bytes, int peer, int tag) override;
  void allgather(void* allData, std::size_t bytesPerRank) override;
  void alltoall(const void* sendData, void* recvData, std::size_t bytesPerRank) override;
  void alltoallv(const void* sendData, const std::size_t* sendCounts, const std::size_t* sendDispls, void* recvData,
                 const std::size_t* recvCounts, const std::size_t* recvDispls) override;
  void broadcast(void* data, std::size_t bytes, int root) override;
  void barrier() override;
  void barrier(const std::vector<int>& ranks) override;
  Request iallgather(void* allData, std::size_t bytesPerRank) override;
  Request ialltoall(const void* sendData, void* recvData, std::size_t bytesPerRank) override;
  Request ibarrier() override;
  Request isend(const void* data, std::size_t bytes, int peer, int tag) override;
  Request irecv(void* data, std::size_t bytes, int peer, int tag) override;
  std::shared_ptr<Bootstrap> split(int color, int key) override;
  void abort(const std::string& reason) override;
  void setTimeout(std::chrono::milliseconds timeout) override;
  std::chrono::milliseconds timeout() const override;

  // When this rank's world came up (InitTimings); a child of split() reports
  // its world's. No communication; thread-safe.
  InitTimings initTimings() const;
  // This communicator's counters (Counters) as they are now. No
  // communication; thread-safe (each count is read on its own: counts read
  // while calls run need not be consistent with each other).
  Counters counters() const;

 private:
  // A communicator made by split() (internal).
  explicit TcpBootstrap(std::shared_ptr<Communicator> impl);

  std::shared_ptr<Communicator> impl_;  // lib/core/communicator.hpp
};

}  // namespace tether
