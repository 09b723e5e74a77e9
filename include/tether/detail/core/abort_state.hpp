// tether/detail/core/abort_state.hpp — a world's abort as one rank records
// it, the same in every world (lib/core's AbortChannel, the in-process
// testing world's mailboxes): the first abort wins (its origin and reason;
// later ones are ignored), and every call of the rank then fails with
// Error{Aborted} "<who>: <call>: aborted on this rank: <reason>" or "...:
// aborted by rank O: <reason>", whose peer() is the origin. Not thread-safe:
// each world guards it. Header-only, C++17.
#pragma once

#include <cstddef>
#include <string>

#include "tether/detail/core/failures.hpp"
#include "tether/error.hpp"

namespace tether {
namespace detail {
namespace core {

// An abort's reason travels to the peers in one control frame (at most
// 64 KiB): a longer one is cut here, the same in every world, so that it
// still reaches every rank as the abort it is, not as a frame too large.
constexpr std::size_t kMaxAbortReasonBytes = 4096;

// At most kMaxAbortReasonBytes, the mark of the cut included, so that a
// reason cut once passes the next rank unchanged.
inline std::string boundedReason(const std::string& reason) {
  if (reason.size() <= kMaxAbortReasonBytes) return reason;
  const std::string mark = " [cut from " + std::to_string(reason.size()) + " bytes]";
  return reason.substr(0, kMaxAbortReasonBytes - mark.size()) + mark;
}

class AbortState {
 public:
  bool aborted() const { return aborted_; }
  // The world rank that aborted (-1: none, or the world itself).
  int origin() const { return origin_; }
  const std::string& reason() const { return reason_; }

  // Records an abort by `origin` unless one is recorded; true if this one
  // was. Its reason is kept up to kMaxAbortReasonBytes.
  bool record(int origin, const std::string& reason) {
    if (aborted_) return false;
    aborted_ = true;
    origin_ = origin;
    reason_ = boundedReason(reason);
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
