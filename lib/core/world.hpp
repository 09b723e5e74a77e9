// The world: one per TcpBootstrap world communicator (children share it);
// the composition root of the core units, and nothing else. It owns the
// event loop and who runs it (Driver), the listener and connector, the
// rendezvous and the units, and wires them to each other: Peers (the links:
// dials, the budget, link events and control frames; the links' LinkSink),
// Calls (an operation from start to end: frames sent, receives posted, a
// lost peer's operations failed; the OpTable's TransferView), the LinkTable
// (links, epochs, rules R1-R8), LinkAdmission (the connector's questions),
// RendezvousHost (the rendezvous' view of the links), the OpTable
// (operations), the SequenceGuard (collective sequences), the Lifecycle
// (join and close states), AbortChannel and AbortRelay (the abort state,
// where notices go), the StallProbe (who is behind a timeout) and the
// ObserverDesk (what tether-status is told). Its own work is the bring-up,
// abort and orderly close (world.cpp). Everything below "progress thread"
// runs only on the thread that runs the event loop, so it needs no locks.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/layer.hpp"
#include "core/abort_channel.hpp"
#include "core/abort_relay.hpp"
#include "core/admission.hpp"
#include "core/await_watch.hpp"
#include "core/bring_up.hpp"
#include "core/calls.hpp"
#include "core/completion.hpp"
#include "core/driver.hpp"
#include "core/lifecycle.hpp"
#include "core/link_table.hpp"
#include "core/observe.hpp"
#include "core/observer_desk.hpp"
#include "core/op_table.hpp"
#include "core/payload_pool.hpp"
#include "core/peers.hpp"
#include "core/send_window.hpp"
#include "core/sequence.hpp"
#include "core/sequence_guard.hpp"
#include "core/stall_probe.hpp"
#include "core/world_config.hpp"
#include "link/connector.hpp"
#include "rendezvous/rendezvous.hpp"

TETHER_LAYER(6, "core");

namespace tether {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

class World final {
 public:
  using Clock = std::chrono::steady_clock;

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
  bool forked() const { return calls_.forked(); }
  // Throws Error{InvalidArgument} naming both processes when forked().
  void checkProcess(std::string_view opName) const { calls_.checkProcess(opName); }

  const WorldConfig& config() const { return cfg_; }
  int rank() const { return cfg_.rank; }
  int nranks() const { return cfg_.nranks; }
  // After the rendezvous: every rank's advertised address (immutable).
  PeerAddress address(int rank) const { return rendezvous_->address(rank); }
  const Topology& topology() const { return topology_; }
  // The calls' side: start, wait, cancel; send frames, post receives.
  Calls& calls() { return calls_; }

  // ---- calling threads ----
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

 private:
  explicit World(WorldConfig config);
  // The last reference's end: ~World, or in a forked child abandon().
  static void release(World* w);
  // A forked child's copy: closes (close(2) only) the sockets this world
  // opened, and nothing else; the object is leaked.
  void abandon();
  void start();
  void finishInit(std::exception_ptr e);
  void learnTopology();
  void shutdownOnProgress(const std::shared_ptr<Completion>& done, std::chrono::milliseconds drain,
                          std::chrono::milliseconds limit);
  void armDrain(const std::shared_ptr<Completion>& done, std::chrono::milliseconds drain);
  // `from`: the rank whose notice this is (-1: decided here).
  void abortOnProgress(const wire::AbortNotice& n, bool notifyPeers, int from = -1);
  // What an observer (tether-status) is told.
  ObserverDesk::Answers observerAnswers();

  WorldConfig cfg_;
  InitClock init_{cfg_.began};  // bring-up phases (any thread)
  LinkCounters links_;          // dials, re-dials, budget closes (any thread)
  // The two jobs between operations and links. They hold references to the
  // units below and are declared first, so they outlive every unit (a link
  // closed while the table goes still finds its sink).
  Peers peers_;  // the links: dials, the budget, link events, control frames
  Calls calls_;  // an operation from start to end
  asio::io_context io_{1};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  // The operations in flight and their mailbox; the collective sequences.
  OpTable ops_{cfg_.rank, calls_};
  SequenceGuard sequences_{cfg_.rank, ops_};
  SendWindows windows_{cfg_.rank, cfg_.p2pWindow};  // frames a peer has not received, point-to-point and collective
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
  AbortRelay relay_{cfg_.rank, cfg_.nranks, abort_, peers_};
  StallProbe probe_;
  ObserverDesk desk_{io_, cfg_.rank, cfg_.handshakeTimeout, observerAnswers()};  // tether-status's questions
  AwaitWatch awaitWatch_;  // dials a peer awaited without a link (its loss shows at once)
  std::atomic<bool> closed_{false};
};

}  // namespace tether
