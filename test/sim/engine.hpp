// The simulator's engine: a discrete-event loop (one thread, integer
// picoseconds, ties broken by insertion order, so a run is deterministic)
// over hosts that share cores and one NIC among their ranks, links that are
// opened by a handshake on first use and then persist, and messages that
// cost CPU at both ends, NIC time at both hosts and one latency between
// them (model.hpp, docs/scale.md). What runs on the ranks — a collective's
// plans or a rendezvous — is a Protocol that the engine calls back.
//
// Periodic mode (for algorithms whose plans are the same on every host up to
// a shift of the rank numbers by multiples of R): only host 0's ranks
// 0..R-1 run. A message from rank a to rank b = kR + b' on host k is, by
// that symmetry, the same event as the one rank b' (host 0) receives from
// rank a - kR, so it is delivered there, through host 0's NIC, which stands
// for every host's. Counts are then multiplied by the number of hosts.
#pragma once

#include <cstdint>
#include <queue>
#include <vector>

#include "containers.hpp"
#include "model.hpp"
#include "wire/handshake.hpp"

namespace tether::sim {

struct Message {
  std::int32_t from = 0;  // sending simulated rank
  std::int32_t to = 0;    // receiving simulated rank
  std::int32_t src = 0;   // the sender, as the receiver names it
  std::int32_t dst = 0;   // the receiver, as the sender names it
  std::uint32_t step = 0, call = 0, depth = 0;
  std::uint16_t kind = 0;
  std::uint64_t bytes = 0;     // payload (the header is added on the wire)
  wire::SharedBytes payload;   // rendezvous frames only; shared, never copied
  std::uint32_t next = kNone;  // queued behind a link that is coming up
};

// What a message carries besides its size.
struct Frame {
  std::uint32_t step = 0, call = 0, depth = 0;
  std::uint16_t kind = 0;
  wire::SharedBytes payload;
};

class Protocol {
 public:
  // The receiver's CPU has read `m`.
  virtual void delivered(int rank, const Message& m) = 0;
  // A settle need not wait for `m` any more (eager: copied; large: sent).
  virtual void sendLeft(int rank, const Message& m) = 0;
  virtual void linkUp(int rank, int peer) = 0;
  // A released link has closed (both sides get it).
  virtual void linkDown(int /*rank*/, int /*peer*/) {}
  // The CPU work of work(), or the moment of at(), has come.
  virtual void resumed(int rank, std::uint64_t token) = 0;

 protected:
  ~Protocol() = default;
};

struct Counters {
  std::uint64_t messages = 0;                     // sent by the simulated ranks
  std::uint64_t halfConnections = 0;              // dials started by the simulated ranks, in halves (engine.cpp)
  std::uint64_t rootMessages = 0, rootBytes = 0;  // sent or received by rank 0
  std::vector<std::uint64_t> sentBytes;           // payload, per simulated rank
};

class Engine {
 public:
  explicit Engine(const Params& params);

  const Params& params() const { return p_; }
  int nranks() const { return n_; }
  int ranksPerHost() const { return p_.ranksPerHost; }
  void setPeriodic(bool on) { periodic_ = on; }
  bool periodic() const { return periodic_; }
  int simulated() const { return periodic_ ? p_.ranksPerHost : n_; }
  // How many real ranks each simulated one stands for.
  int scale() const { return periodic_ ? p_.hosts : 1; }
  void setProtocol(Protocol* protocol) { protocol_ = protocol; }
  Time now() const { return now_; }

  // CPU work on `rank`'s core; resumed(rank, token) when it is done.
  void work(int rank, Time cost, std::uint64_t token);
  // resumed(rank, token) at time t, costing nothing.
  void at(Time t, int rank, std::uint64_t token);
  // Sends from simulated rank `from` to rank `dst` (a real rank number).
  void send(int from, int dst, std::uint64_t bytes, Frame frame);
  // Opens the link from `from` to `dst` unless it exists or is coming up.
  void connect(int from, int dst);
  // Closes the link between `rank` and `peer` if both sides are up with
  // nothing queued (else false, nothing done), by tether's idle goodbye: a
  // goodbye and its acknowledgement, each a send and a read on the CPUs and
  // one latency (not counted as messages); then the link is gone on both
  // sides and linkDown() says so. A later send dials again. Full mode only.
  bool release(int rank, int peer);
  // The link budget (Params::maxLinks) from now on (full mode only): a
  // rank that opens or admits a link while it holds `links` closes its
  // least recently used idle link. 0: none.
  void setLinkBudget(int links) { budget_ = links; }
  // A link from `from` to `dst` exists or is coming up.
  bool linked(int from, int dst) { return entry(from, dst) != nullptr; }
  // Runs events until none is left.
  void run();

  Counters& counters() { return counters_; }
  void resetCounters();
  // Links of a real rank (they persist across operations).
  std::uint32_t links(int rank) const;
  // The most links of any rank but rank 0 (reported on its own).
  std::uint32_t peakLinks() const;
  std::uint64_t events() const { return events_; }

 private:
  enum class Ev : std::uint8_t { JobDone, SendLeft, NicArrive, Arrive, AcceptArrive, DialerUp, At, Bye, ByeAck };
  enum class JobKind : std::uint8_t { Work, Send, Recv, Dial, Accept, Bye, ByeRead, ByeAckRead };
  enum class State : std::uint8_t { Sleeping, Waiting, Running };
  struct Event {
    Time t;
    std::uint64_t seq;
    std::uint64_t arg;
    std::int32_t rank;
    Ev kind;
  };
  struct Later {
    bool operator()(const Event& a, const Event& b) const { return a.t != b.t ? a.t > b.t : a.seq > b.seq; }
  };
  struct Job {
    Time cost;
    std::uint64_t arg;
    JobKind kind;
  };
  // A rank's own actions (its sends, dials, calls) run before frames that
  // wait to be read: tether tries a send at once, from the handler that
  // posts it, and reads the next frame afterwards.
  struct RankState {
    Fifo<Job> own, incoming;
    Job current{};
    State state = State::Sleeping;
    Time since = 0;  // when it got its core
    bool idle() const { return own.empty() && incoming.empty(); }
  };
  struct HostState {
    int freeCores = 0;
    Fifo<std::int32_t> waiting;
    Time egressFree = 0, ingressFree = 0;
  };
  struct Handshake {
    std::int32_t dialer, dialerPeer, acceptor, acceptorPeer;
    bool local;
  };

  void schedule(Time t, Ev kind, int rank, std::uint64_t arg);
  void dispatch(const Event& e);
  void pushJob(int rank, Job job);
  void startRunning(int rank, bool switched);
  void startNext(int rank, Time extra);
  void jobDone(int rank);
  void handCore(HostState& host);
  void finishJob(int rank, const Job& job);
  HostState& hostOf(int simulatedRank) { return hosts_[periodic_ ? 0 : simulatedRank / p_.ranksPerHost]; }
  // The receiving simulated rank, and how it names the sender.
  void route(int from, int dst, std::int32_t& to, std::int32_t& src) const;
  bool sameHost(int from, int dst) const;
  Time latency(bool local) const { return fromUs(local ? p_.localLatencyUs : p_.latencyUs); }
  LinkEntry* entry(int rank, int peer);
  LinkEntry& addEntry(int rank, int peer);
  void startDial(int from, int dst);
  void linkUp(int rank, int peer);
  void closeLink(int rank, int peer);
  void transmit(std::uint32_t msg);
  void touch(int rank, int peer);
  void enforceBudget(int rank, int newPeer);
  std::uint32_t allocMessage();

  Params p_;
  int n_;
  bool periodic_ = false;
  int budget_ = 0;
  std::uint32_t useClock_ = 0;
  Protocol* protocol_ = nullptr;
  Time now_ = 0;
  std::uint64_t seq_ = 0, events_ = 0;
  std::priority_queue<Event, std::vector<Event>, Later> queue_;
  std::vector<RankState> ranks_;
  std::vector<HostState> hosts_;
  std::vector<PeerMap> links_;     // per real rank: links made in full-mode phases
  std::vector<PeerMap> symLinks_;  // per rank of host 0: links made in periodic phases, at every shift
  std::vector<Message> messages_;
  std::vector<std::uint32_t> freeMessages_;
  std::vector<Handshake> handshakes_;
  std::vector<std::uint32_t> freeHandshakes_;
  Counters counters_;
};

}  // namespace tether::sim
