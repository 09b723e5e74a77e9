// tether/detail/core/abort_state.hpp — a world's abort as one rank records
// it, the same in every world (lib/core's AbortChannel, the in-process
// testing world's mailboxes): the first abort wins (its origin and reason;
// later ones are ignored), and every call of the rank then fails with
// Error{Aborted} "<who>: <call>: aborted on this rank: <reason>" or "...:
// aborted by rank O: <reason>", whose peer() is the origin. Not thread-safe:
// each world guards it. Header-only, C++17.
#pragma once

#include <string>

#include "tether/detail/core/failures.hpp"
#include "tether/error.hpp"

namespace tether {
namespace detail {
namespace core {

class AbortState {
 public:
  bool aborted() const { return aborted_; }
  // The world rank that aborted (-1: none, or the world itself).
  int origin() const { return origin_; }
  const std::string& reason() const { return reason_; }

  // Records an abort by `origin` unless one is recorded; true if this one was.
  bool record(int origin, const std::string& reason) {
    if (aborted_) return false;
    aborted_ = true;
    origin_ = origin;
    reason_ = reason;
    return true;
  }

  // The error of `call` on `rank` (named `who`; world rank `worldRank`).
  Error error(const std::string& who, const std::string& call, int rank, int worldRank) const {
    return Error(ErrorCode::Aborted,
                 failures::failure(who, call, failures::aborted(origin_ == worldRank, origin_, reason_)), rank,
                 origin_);
  }

 private:
  bool aborted_ = false;
  int origin_ = -1;
  std::string reason_;
};

}  // namespace core
}  // namespace detail
}  // namespace tether
