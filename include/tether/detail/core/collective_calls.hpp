// tether/detail/core/collective_calls.hpp — the calling-thread half of a
// communicator's collectives, the same in every world: collective ids in call
// order, the broken-communicator policy (once a collective failed here, the
// ranks no longer agree on where they are, so every later collective is
// refused with Protocol naming the first failure) and the abort-on-failure
// policy (which failures of a world collective abort the world). Used by
// lib/core's Communicator and the in-process testing world. The ids are the
// calling thread's (the holder of the communicator's call slot,
// call_slot.hpp, alone uses them); the broken record is any thread's.
// Header-only, C++17.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "tether/error.hpp"

namespace tether {
namespace detail {
namespace core {

// Why a communicator's collectives are refused: the first failure of one of
// them (or of one of its subset barriers). Marked when that collective fails,
// whether or not its caller waits for it or tests its request (over TCP the
// progress thread marks it), and read by the next call. Any thread.
class BrokenRecord {
 public:
  // A collective failed with `why` (the first failure is kept).
  void mark(const std::string& why) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!why_.empty()) return;
    why_ = why.empty() ? "(no message)" : why;
    broken_.store(true, std::memory_order_release);
  }
  bool broken() const { return broken_.load(std::memory_order_acquire); }
  // The first failure's message; empty while usable.
  std::string why() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return why_;
  }

 private:
  std::atomic<bool> broken_{false};  // so that a usable communicator's call takes no lock
  mutable std::mutex mutex_;
  std::string why_;
};

class CollectiveCalls {
 public:
  // The id the next collective takes.
  std::uint64_t next() const { return next_; }
  // Takes it: call only once the call has passed usable().
  std::uint64_t take() { return next_++; }

  // Throws Error{Protocol} if an earlier collective failed: "<who>: <call>:
  // communicator unusable after an earlier collective failed: <its error>".
  void usable(const std::string& who, const std::string& call, int rank) const {
    if (!broken_->broken()) return;
    throw Error(ErrorCode::Protocol,
                who + ": " + call + ": communicator unusable after an earlier collective failed: " + broken_->why(),
                rank);
  }
  // A collective failed with `why` (the first failure is kept).
  void markBroken(const std::string& why) { broken_->mark(why); }
  bool broken() const { return broken_->broken(); }
  // The record, for whoever sees this communicator's collectives fail.
  const std::shared_ptr<BrokenRecord>& record() const { return broken_; }

 private:
  std::uint64_t next_ = 1;
  std::shared_ptr<BrokenRecord> broken_ = std::make_shared<BrokenRecord>();
};

// A collective of the world communicator that failed with `e` here leaves
// every other rank waiting for steps this rank will never send, so the world
// is aborted with the error as reason: for Protocol, Timeout, and PeerLost
// naming a rank of the world (of `nranks`). Child communicators and subset
// barriers must not stop ranks outside them; point-to-point concerns two ranks.
inline bool failureAbortsWorld(const Error& e, int nranks) {
  const bool lost = e.code() == ErrorCode::PeerLost && e.peer() >= 0 && e.peer() < nranks;
  return lost || e.code() == ErrorCode::Protocol || e.code() == ErrorCode::Timeout;
}

}  // namespace core
}  // namespace detail
}  // namespace tether
