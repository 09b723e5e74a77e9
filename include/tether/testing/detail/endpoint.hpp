// tether/testing/detail/endpoint.hpp — one rank's view of one in-process communicator.
//
// Its ranks, names, deadlines and the waits of its calls (detail/run.hpp),
// with abort handling and errors that name rank, peer and operation; its
// collectives' places in their sequences. Header-only, C++17.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "tether/detail/core/call_steps.hpp"
#include "tether/detail/core/deadlines.hpp"
#include "tether/detail/core/failures.hpp"
#include "tether/detail/core/group.hpp"
#include "tether/error.hpp"
#include "tether/testing/detail/message.hpp"
#include "tether/testing/detail/world_state.hpp"

namespace tether {
namespace testing {
namespace detail {

namespace failures = ::tether::detail::core::failures;

class Run;
using Group = ::tether::detail::core::Group;

class Endpoint {
 public:
  using Clock = ::tether::detail::core::DeadlineClock;

  // The world mutex, held; before it is let go, the runs woken meanwhile
  // are resumed (WorldState::drainLocked), here as a waiting rank does
  // before it sleeps.
  class Locked {
   public:
    explicit Locked(WorldState& world) : world_(world), lock_(world.mutex) {}
    ~Locked() { world_.drainLocked(); }
    Locked(const Locked&) = delete;
    Locked& operator=(const Locked&) = delete;
    std::unique_lock<std::mutex>& lock() { return lock_; }

   private:
    WorldState& world_;
    std::unique_lock<std::mutex> lock_;
  };

  Endpoint(std::shared_ptr<WorldState> world, Group group, std::chrono::milliseconds timeout)
      : world_(std::move(world)),
        group_(std::move(group)),
        names_(group_.comm == 0 ? ::tether::detail::core::RankNames(group_.rank)
                                : ::tether::detail::core::RankNames(group_.rank, group_.worldRanks)),
        timeoutMs_(timeout.count()) {}
  // This rank's records of this communicator's collectives (and its
  // subsets') leave its sequence guard, and a child's collective lanes go
  // (but one a send still waits on), as a TCP rank's go when its
  // communicator ends.
  ~Endpoint() {
    Locked lock(*world_);
    for (const auto& s : sequences_) {
      mailbox().sequences.remove(s.first);
      if (s.first != 0) mailbox().windows.coll.forgetComm(s.first);
    }
  }
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  // Its id (the world's is 0), this rank's rank and each rank's world rank.
  const Group& group() const { return group_; }
  int rank() const { return group_.rank; }
  int size() const { return group_.size(); }
  int worldRank() const { return group_.worldRank(); }
  int worldRankOf(int rank) const { return group_.worldRankOf(rank); }
  std::uint64_t comm() const { return group_.comm; }
  const std::shared_ptr<WorldState>& world() const { return world_; }

  std::chrono::milliseconds timeout() const { return std::chrono::milliseconds(timeoutMs_.load()); }
  void setTimeout(std::chrono::milliseconds timeout) { timeoutMs_.store(timeout.count()); }

  // The deadline of a call starting now (tether/detail/core/deadlines.hpp).
  Clock::time_point deadline() const { return ::tether::detail::core::deadlineAfter(timeout()); }

  // How its errors name ranks: "rank 1", or "rank 1 (world 3)" on a child communicator.
  const ::tether::detail::core::RankNames& names() const { return names_; }
  std::string who() const { return names_.who(); }

  [[noreturn]] void fail(ErrorCode code, const std::string& where, int peer, const std::string& what) const {
    throw Error(code, failures::failure(who(), where, what), rank(), peer);
  }

  // A call of this rank on this communicator, named `where` in its errors.
  Call call(const std::string& where) const {
    Call c;
    c.names = &names_;
    c.where = where;
    return c;
  }

  // Collective `id` of call `args` on
  // communicator `comm` (this one, or a subset's): "allgather#2" (on the
  // world's), "barrier#1 (comm 5d2e9a01c0ffee00)" (another's), what its
  // frames carry, and its place in its communicator's sequence.
  Call collective(std::uint64_t comm, std::uint64_t id, const ::tether::detail::coll::Call& args) const {
    namespace coll = ::tether::detail::coll;
    Call c = call(coll::callName(coll::opName(args.op), id, comm));  // the world's is comm 0
    c.comm = comm;
    c.coll = id;
    c.code = static_cast<std::uint32_t>(args.op);
    c.root = ::tether::detail::core::rootOnWire(args);
    c.seq = &sequence(comm);
    return c;
  }

  // A point-to-point message with `tag`, `bytes` long, and the key of one from `peer`.
  Header sendFrame(int tag, std::size_t bytes) const { return InProcessCalls::sendFrame(group_.comm, tag, bytes); }
  Key recvKey(int peer, int tag) const { return InProcessCalls::sendKey(worldRankOf(peer), group_.comm, tag); }

  // A collective takes its place in its communicator's sequence (the shared
  // guard, tether/detail/core/sequence_guard.hpp), in id order: it fails
  // (its first settle throws) if a message of another operation or root
  // came first at its id, or one broke the sequence while none ran.
  void begin(Call& call) const {
    Locked lock(*world_);
    if (sequences().begin(*call.seq, call)) sequences().checkStashed(call, table().mailbox());
  }

 private:
  friend class Run;  // runs under the world mutex (detail/run.hpp)

  // A call ended (`*e`: its error, or null) or never ran (`e` null): a
  // collective that returned with a message left at its id fails (its
  // sender ran another algorithm or operation), and the message is dropped.
  void endLocked(Call& call, std::exception_ptr* e) const {
    if (!call.seq) return;
    if (e)
      sequences().end(call, *e, table().mailbox());
    else
      sequences().leave(call);
    call.seq = nullptr;
  }

  CallTable& table() const { return mailbox().calls; }

  RankMailbox& mailbox() const { return *world_->mailboxes[static_cast<std::size_t>(worldRank())]; }
  SequenceGuard& sequences() const { return mailbox().sequences; }

  // The record of communicator `comm`'s collectives here, given to this
  // rank's sequence guard when first asked for (a subset's lanes counted).
  InProcessCalls::Seq& sequence(std::uint64_t comm) const {
    Locked lock(*world_);
    auto& seq = sequences_[comm];
    if (!seq) {
      seq = std::make_shared<InProcessCalls::Seq>(names_);
      mailbox().sequences.add(comm, seq);
    }
    return *seq;
  }

  void throwIfAbortedLocked(const std::string& where) const {
    if (mailbox().abort.aborted()) throw mailbox().abortError(names_, where);
  }

  // The PeerLost error of call `where`, which waits for world rank `gone`
  // that left, as TcpBootstrap says of a peer that closed its bootstrap.
  Error leftError(const std::string& where, int gone) const { return RankMailbox::leftError(names_, where, gone); }

  // Sleeps on this rank's condition variable until ready() or the deadline
  // (then throws the Timeout). Woken runs are resumed first. (An abort, and
  // a peer's leaving, fail the calls in flight at once: WorldState.)
  template <class Peer, class WaitingFor, class Ready>
  void waitLocked(std::unique_lock<std::mutex>& lock, Clock::time_point until, const std::string& where, Peer peer,
                  WaitingFor waitingFor, Ready ready) const {
    RankMailbox& box = mailbox();
    for (;;) {
      world_->drainLocked();
      if (ready()) return;
      if (box.wake.wait_until(lock, until) == std::cv_status::timeout) {
        world_->drainLocked();
        if (ready()) return;
        fail(ErrorCode::Timeout, where, peer(), failures::timedOut(waitingFor()));
      }
    }
  }

  std::shared_ptr<WorldState> world_;
  Group group_;
  ::tether::detail::core::RankNames names_;
  std::atomic<long long> timeoutMs_;
  // Communicator id -> this rank's record of its collectives (this
  // communicator's and its subsets'); under the world mutex.
  mutable std::map<std::uint64_t, std::shared_ptr<InProcessCalls::Seq>> sequences_;
};

}  // namespace detail
}  // namespace testing
}  // namespace tether
