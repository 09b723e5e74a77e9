// The abort channel: the world's abort state (readable from any thread), the
// Aborted errors made from it, and where this rank sends the abort notice.
//
// Forwarding (docs/faults.md, "Abort propagation"): a notice travels over
// every link open at the time and, so that it reaches every rank whatever the
// link budget has closed, down a fixed spanning tree of the world (the
// rendezvous tree shape, radix 8, rooted at rank 0): the rank that starts an
// abort sends it to the root and to its own children; every rank forwards the
// first notice it handles once, to its children (dialling where no link is
// open). A target known to be dead or gone — the lost rank the notice names,
// or a rank whose link closed — is replaced by its children, so the tree
// never waits on a dead rank. Later notices are not forwarded: each rank
// sends at most once, so forwarding cannot loop. Progress thread except where
// marked.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "base/layer.hpp"
#include "tether/detail/core/abort_state.hpp"
#include "tether/detail/core/rank_names.hpp"
#include "tether/error.hpp"
#include "wire/notice.hpp"

TETHER_LAYER(6, "core");

namespace tether {

class AbortChannel {
 public:
  static constexpr int kRadix = 8;

  AbortChannel(int rank, int nranks) : rank_(rank), nranks_(nranks), sent_(static_cast<std::size_t>(nranks), 0) {}

  // ---- any thread ----
  bool aborted() const { return aborted_.load(); }
  // Records `n` as this world's abort unless one is recorded already.
  void record(const wire::AbortNotice& n);
  // Error{Aborted} for `opName`, naming the origin (peer(), a world rank:
  // an abort is the world's) and its reason; `names`: how the call's
  // communicator names this rank (else by its world rank).
  Error abortedError(const std::string& opName) const;
  Error abortedError(const std::string& opName, const detail::core::RankNames& names) const;

  // ---- progress thread ----
  // True once: the first abort this rank handles (records `n` if none yet).
  bool beginHandling(const wire::AbortNotice& n);
  bool handled() const { return handled_; }
  wire::AbortNotice notice() const {
    std::lock_guard lock(mutex_);
    return {static_cast<std::uint32_t>(state_.origin()), state_.reason(), lost_};
  }
  // The recorded notice, encoded for an Abort frame.
  std::vector<unsigned char> payload() const;
  // The ranks this rank sends the notice to down the tree (`started`: it
  // began the abort here, so the root gets it too). `unavailable(r)`: r is
  // dead or gone; it is replaced by its children. Marks them as sent to.
  std::vector<int> treeTargets(bool started, const std::function<bool(int)>& unavailable);
  // The link to `peer` (a tree target) failed: the ranks to send to in its
  // place (its children, recursively around unavailable ones); empty if
  // `peer` was not a target. Marks them as sent to.
  std::vector<int> reroute(int peer, const std::function<bool(int)>& unavailable);
  // A notice was (or is being) sent to `peer` down the tree.
  bool sentTo(int peer) const { return sent_[static_cast<std::size_t>(peer)] != 0; }
  void markSent(int peer) { sent_[static_cast<std::size_t>(peer)] = 1; }

 private:
  void addAround(int r, const std::function<bool(int)>& unavailable, std::vector<int>& out);

  const int rank_, nranks_;
  std::atomic<bool> aborted_{false};
  mutable std::mutex mutex_;
  detail::core::AbortState state_;      // the first abort recorded (tether/detail/core/abort_state.hpp)
  std::uint32_t lost_ = wire::kNoRank;  // the rank its notice names as lost
  bool handled_ = false;
  std::vector<char> sent_;
};

}  // namespace tether
