// tether/testing/detail/endpoint.hpp — one rank's view of one in-process communicator.
//
// Posts and takes messages on the shared mailboxes, with the call's deadline,
// abort handling and errors that name rank, peer and operation — the in-process
// counterpart of the TCP link layer. Header-only, C++17.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "tether/detail/core/call_frames.hpp"
#include "tether/detail/core/deadlines.hpp"
#include "tether/detail/core/failures.hpp"
#include "tether/error.hpp"
#include "tether/testing/detail/message.hpp"
#include "tether/testing/detail/world_state.hpp"

namespace tether {
namespace testing {
namespace detail {

namespace failures = ::tether::detail::core::failures;

class Endpoint {
 public:
  using Clock = ::tether::detail::core::DeadlineClock;

  Endpoint(std::shared_ptr<WorldState> world, std::uint64_t comm, std::vector<int> members, int rank,
           std::chrono::milliseconds timeout)
      : world_(std::move(world)), comm_(comm), members_(std::move(members)), rank_(rank), timeoutMs_(timeout.count()) {}

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(members_.size()); }
  int worldRank() const { return members_[static_cast<std::size_t>(rank_)]; }
  int worldRankOf(int rank) const { return members_[static_cast<std::size_t>(rank)]; }
  std::uint64_t comm() const { return comm_; }
  const std::vector<int>& members() const { return members_; }
  const std::shared_ptr<WorldState>& world() const { return world_; }

  std::chrono::milliseconds timeout() const { return std::chrono::milliseconds(timeoutMs_.load()); }
  void setTimeout(std::chrono::milliseconds timeout) { timeoutMs_.store(timeout.count()); }

  // The deadline of a call starting now (tether/detail/core/deadlines.hpp).
  Clock::time_point deadline() const { return ::tether::detail::core::deadlineAfter(timeout()); }

  // "rank 1", or "rank 1 (world 3)" on a child communicator.
  std::string who() const {
    std::string text = failures::rankName(rank_);
    if (comm_ != 0) text += " (world " + std::to_string(worldRank()) + ")";
    return text;
  }

  [[noreturn]] void fail(ErrorCode code, const std::string& where, int peer, const std::string& what) const {
    throw Error(code, failures::failure(who(), where, what), rank_, peer);
  }

  void throwIfAborted(const std::string& where) const {
    std::lock_guard<std::mutex> lock(world_->mutex);
    throwIfAbortedLocked(where);
  }

  // A send: delivered (slot empty), or held by its window until the peer
  // has received enough of this rank's earlier frames on its lane.
  struct Sent {
    std::shared_ptr<SendSlot> slot;
    int peer = 0;
    ChannelKey key;
  };

  // Copies the message into the peer's mailbox (send is buffered, like a
  // socket buffer) — past the lane's window, holds it instead.
  Sent post(int peer, ChannelKey key, Message message, const std::string& where) const {
    key.comm = comm_;
    key.source = rank_;
    std::lock_guard<std::mutex> lock(world_->mutex);
    throwIfAbortedLocked(where);
    return Sent{world_->sendLocked(worldRank(), worldRankOf(peer), key, std::move(message)), peer, key};
  }

  // Waits until a held send is delivered (or `until`, an abort, the peer
  // leaving, an interrupt); one that fails is dropped, never delivered.
  void waitSent(const Sent& sent, Clock::time_point until, const std::string& where, const Interrupt* interrupt) const {
    if (!sent.slot) return;
    std::unique_lock<std::mutex> lock(world_->mutex);
    try {
      waitLocked(
          lock, until, where, sent.peer, [&] { return heldText(sent); }, [&] { return sent.slot->done; }, interrupt);
    } catch (...) {
      world_->dropLocked(sent.slot);
      throw;
    }
  }
  // Gives up on a held send (its call failed): it is never delivered.
  void drop(const Sent& sent) const {
    if (!sent.slot) return;
    std::lock_guard<std::mutex> lock(world_->mutex);
    world_->dropLocked(sent.slot);
  }
  // A look without waiting (Request::test); one that fails is dropped.
  bool delivered(const Sent& sent, const std::string& where) const {
    if (!sent.slot) return true;
    std::lock_guard<std::mutex> lock(world_->mutex);
    try {
      throwIfAbortedLocked(where);
      if (sent.slot->done) return true;
      throwIfLeftLocked(where, sent.peer);
    } catch (...) {
      world_->dropLocked(sent.slot);
      throw;
    }
    return false;
  }

  // The key of a point-to-point message from `peer` with `tag`.
  ChannelKey pointToPoint(int peer, int tag) const {
    ChannelKey key;
    key.comm = comm_;
    key.channel = Channel::PointToPoint;
    key.sequence = static_cast<std::uint64_t>(tag);
    key.source = peer;
    return key;
  }

  // Point-to-point receive: the oldest message waiting for (peer, tag), else
  // a receive posted for it, which the next such message fills; sizes must agree.
  void receivePointToPoint(void* data, std::size_t bytes, int peer, int tag, const std::string& where) const {
    const auto until = deadline();
    const ChannelKey key = pointToPoint(peer, tag);
    RecvSlot slot;
    post(key, slot, where);
    try {
      waitFor(slot, until, where, peer, tag, nullptr);
    } catch (...) {
      withdraw(key, slot);
      throw;
    }
    take(slot, data, bytes, peer, tag, where);
  }

  // The pieces of a receive, for irecv: post it (or take a waiting message) ...
  void post(const ChannelKey& key, RecvSlot& slot, const std::string& where) const {
    std::lock_guard<std::mutex> lock(world_->mutex);
    throwIfAbortedLocked(where);
    postLocked(key, slot);
  }
  // ... wait until it is filled (or `until`, an abort, the sender leaving, an
  // interrupt from another thread) ...
  void waitFor(RecvSlot& slot, Clock::time_point until, const std::string& where, int peer, int tag,
               const Interrupt* interrupt) const {
    std::unique_lock<std::mutex> lock(world_->mutex);
    waitLocked(
        lock, until, where, peer,
        [&] { return failures::waitingFor(failures::messageWithTag(tag), failures::rankName(peer)); },
        [&] { return slot.done; }, interrupt);
  }
  // ... or look without waiting (Request::test) ...
  bool done(const RecvSlot& slot, const std::string& where, int peer) const {
    std::lock_guard<std::mutex> lock(world_->mutex);
    throwIfAbortedLocked(where);
    if (slot.done) return true;
    throwIfLeftLocked(where, peer);
    return false;
  }
  // ... or withdraw it unmatched (true if it was) ...
  bool withdraw(const ChannelKey& key, RecvSlot& slot) const {
    std::lock_guard<std::mutex> lock(world_->mutex);
    return !slot.done && mailbox().matching.unpost(key, &slot);
  }
  // ... and copy its message out once filled.
  void take(const RecvSlot& slot, void* data, std::size_t bytes, int peer, int tag, const std::string& where) const {
    const Message& message = slot.message;
    if (message.payload.size() != bytes) {
      fail(ErrorCode::Protocol, where, peer,
           failures::expectsBytes(peer, ::tether::detail::coll::sendTagFrame(tag, message.payload.size()), bytes));
    }
    if (bytes != 0) std::memcpy(data, message.payload.data(), bytes);
  }

  // Ends the waits that watch `flag` (a nonblocking call's, on another thread).
  void interrupt(Interrupt& flag, Interrupt why) const {
    std::lock_guard<std::mutex> lock(world_->mutex);
    if (flag == Interrupt::None) flag = why;
    mailbox().wake.notify_all();
  }

  // One receive of a collective's round: step `key.step` from `peer`.
  struct CollectiveRecv {
    ChannelKey key;
    int peer = 0;
    void* data = nullptr;
    std::size_t bytes = 0;
    RecvSlot slot;
  };
  // A round's receives, at stable addresses (the mailbox points to their slots).
  using Round = std::deque<CollectiveRecv>;

  // Posts `r` (or takes its message if it is already here).
  void postCollective(CollectiveRecv& r) const {
    r.key.comm = comm_;
    r.key.source = r.peer;
    std::lock_guard<std::mutex> lock(world_->mutex);
    postLocked(r.key, r.slot);
  }

  // Waits for a round's receives in order and copies them, as the TCP world
  // matches a frame: a message of another operation at the same call id, or
  // of the wrong size, is a Protocol error naming both sides.
  void settleCollective(Round& round, const OpStamp& expected, Clock::time_point until,
                        const Interrupt* interrupt) const {
    if (round.empty()) return;
    const std::string where = expected.call();
    std::unique_lock<std::mutex> lock(world_->mutex);
    for (CollectiveRecv& r : round) {
      waitLocked(
          lock, until, where, r.peer,
          [&] { return failures::waitingFor(failures::stepNumber(r.key.step), failures::rankName(r.peer)); },
          [&] {
            rejectForeignCallsLocked(round.front().key, expected);
            for (const CollectiveRecv& other : round)
              if (other.slot.done) checkStamp(other.slot.message, other.peer, expected);
            return r.slot.done;
          },
          interrupt);
    }
    for (const CollectiveRecv& r : round) {
      const Message& message = r.slot.message;
      if (message.payload.size() != r.bytes) {
        fail(ErrorCode::Protocol, where, r.peer, failures::expectsBytes(r.peer, message.describe(), r.bytes));
      }
      if (r.bytes != 0) std::memcpy(r.data, message.payload.data(), r.bytes);
    }
  }

  // Withdraws the round's receives that no message matched (a failed call).
  void withdraw(Round& round) const {
    std::lock_guard<std::mutex> lock(world_->mutex);
    for (CollectiveRecv& r : round)
      if (!r.slot.done) mailbox().matching.unpost(r.key, &r.slot);
  }

  // After a collective: any message left at its call id was sent by a rank
  // that called something else or ran another algorithm.
  void rejectLeftovers(ChannelKey key, const OpStamp& expected) const {
    key.comm = comm_;
    std::lock_guard<std::mutex> lock(world_->mutex);
    rejectForeignCallsLocked(key, expected);
    raise(expected, ::tether::detail::core::leftoverFrame<Message>(mailbox().matching, OfCall{key}, sourceOf, describe,
                                                                   expected.call()));
  }

 private:
  void postLocked(const ChannelKey& key, RecvSlot& slot) const {
    RankMailbox& box = mailbox();
    if (auto message = box.matching.takeStashed(key)) {
      slot.message = std::move(*message);
      slot.done = true;
      world_->receivedLocked(worldRank(), key, slot.message);
      return;
    }
    box.matching.post(key, PostedRecv{&slot, &slot});
  }

  // "waiting to send to rank 1: it has not yet received ..." (window.hpp).
  std::string heldText(const Sent& sent) const {
    const auto lane = world_->windowLocked(worldRank(), worldRankOf(sent.peer), sent.key);
    return window::waitingToSend(failures::rankName(sent.peer)) +
           (sent.key.channel == Channel::PointToPoint ? window::p2pNote(lane.first, lane.second)
                                                      : window::collectiveNote(lane.first, lane.second));
  }

  RankMailbox& mailbox() const { return *world_->mailboxes[static_cast<std::size_t>(worldRank())]; }

  void throwIfAbortedLocked(const std::string& where) const {
    const ::tether::detail::core::AbortState& abort = mailbox().abort;
    if (!abort.aborted()) return;
    if (abort.origin() < 0)
      fail(ErrorCode::Aborted, where, -1, "aborted by InProcessWorld::abortAll: " + abort.reason());
    throw abort.error(who(), where, rank_, worldRank());
  }

  // `peer` (a rank here) left, as TcpBootstrap says of a peer that closed its
  // bootstrap: PeerLost "lost rank P: it closed its bootstrap".
  void throwIfLeftLocked(const std::string& where, int peer) const {
    if (peer < 0 || peer >= size() || !world_->left[static_cast<std::size_t>(worldRankOf(peer))]) return;
    fail(ErrorCode::PeerLost, where, peer,
         failures::lostRank(peer, failures::closedItsBootstrap() + " (its body returned)"));
  }

  // Sleeps on this rank's condition variable until ready(), an abort, the
  // deadline or `*interrupt`. A peer that left fails the wait: what it sent is
  // already in the mailbox, so nothing more is coming.
  template <class WaitingFor, class Ready>
  void waitLocked(std::unique_lock<std::mutex>& lock, Clock::time_point until, const std::string& where, int peer,
                  WaitingFor waitingFor, Ready ready, const Interrupt* interrupt) const {
    RankMailbox& box = mailbox();
    for (;;) {
      throwIfAbortedLocked(where);
      if (ready()) return;
      throwIfLeftLocked(where, peer);
      const Interrupt why = interrupt ? *interrupt : Interrupt::None;
      if (why == Interrupt::Cancelled) fail(ErrorCode::Aborted, where, -1, failures::cancelledOnThisRank());
      if (why == Interrupt::TimedOut || box.wake.wait_until(lock, until) == std::cv_status::timeout) {
        throwIfAbortedLocked(where);
        if (ready()) return;
        fail(ErrorCode::Timeout, where, peer, failures::timedOut(waitingFor()));
      }
    }
  }

  // The frame checks of tether/detail/core/call_frames.hpp, on this mailbox.
  struct OfCall {
    ChannelKey key;
    bool operator()(const ChannelKey& k) const { return k.sameCall(key); }
  };
  static int sourceOf(const ChannelKey& k) { return k.source; }
  static std::string describe(const Message& m) { return m.describe(); }
  // Why a message from `source` is not of `expected` (another operation or
  // root); empty if it is.
  static std::string mismatch(int source, const Message& m, const OpStamp& expected) {
    if (m.op.name != expected.name) return failures::differentCollectives(source, m.describe());
    if (m.op.root != expected.root) return failures::differentRoots(source, m.op.call(), m.op.root, expected.root);
    return std::string();
  }
  void raise(const OpStamp& expected, const ::tether::detail::core::FrameFault& fault) const {
    if (fault) fail(ErrorCode::Protocol, expected.call(), fault.source, fault.what);
  }
  void checkStamp(const Message& m, int source, const OpStamp& expected) const {
    raise(expected, {source, mismatch(source, m, expected)});
  }
  // A message waiting at this call id from another operation, or with another root.
  void rejectForeignCallsLocked(const ChannelKey& key, const OpStamp& expected) const {
    raise(expected, ::tether::detail::core::foreignFrame<Message>(
                        mailbox().matching, OfCall{key}, sourceOf,
                        [&](int source, const Message& m) { return mismatch(source, m, expected); }));
  }

  std::shared_ptr<WorldState> world_;
  std::uint64_t comm_;
  std::vector<int> members_;  // world rank of each communicator rank
  int rank_;
  std::atomic<long long> timeoutMs_;
};

}  // namespace detail
}  // namespace testing
}  // namespace tether
