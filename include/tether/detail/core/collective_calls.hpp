// tether/detail/core/collective_calls.hpp — the calling-thread half of a
// communicator's collectives, the same in every world: collective ids in call
// order, the broken-communicator policy (once a collective failed here, the
// ranks no longer agree on where they are, so every later collective is
// refused with Protocol naming the first failure) and the abort-on-failure
// policy (which failures of a world collective abort the world). Used by
// lib/core's Communicator and the in-process testing world. Not thread-safe:
// each world guards it with its communicator's lock. Header-only, C++17.
#pragma once

#include <cstdint>
#include <string>

#include "tether/error.hpp"

namespace tether {
namespace detail {
namespace core {

class CollectiveCalls {
 public:
  // The id the next collective takes.
  std::uint64_t next() const { return next_; }
  // Takes it: call only once the call has passed usable().
  std::uint64_t take() { return next_++; }

  // Throws Error{Protocol} if an earlier collective failed: "<who>: <call>:
  // communicator unusable after an earlier collective failed: <its error>".
  void usable(const std::string& who, const std::string& call, int rank) const {
    if (brokenBy_.empty()) return;
    throw Error(ErrorCode::Protocol,
                who + ": " + call + ": communicator unusable after an earlier collective failed: " + brokenBy_, rank);
  }
  // A collective failed with `why` (the first failure is kept).
  void markBroken(const std::string& why) {
    if (brokenBy_.empty()) brokenBy_ = why;
  }
  bool broken() const { return !brokenBy_.empty(); }

 private:
  std::uint64_t next_ = 1;
  std::string brokenBy_;  // first failed collective's message; empty while usable
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
