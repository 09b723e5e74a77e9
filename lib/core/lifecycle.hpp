// Where a world is in its life, as two named states: joining the world (the
// rendezvous) and closing it (the drain that lets queued frames reach the
// peers before the links close). Progress thread only.
#pragma once

#include <chrono>

#include "base/layer.hpp"

TETHER_LAYER(6, "core");

namespace tether {

class Lifecycle {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Join { Pending, Joined, Failed };   // the rendezvous has not ended / succeeded / failed
  enum class Close { Open, Draining, Drained };  // close() not called / waits for the links / every link closed

  Join join() const { return join_; }
  Close close() const { return close_; }
  bool joining() const { return join_ == Join::Pending; }
  bool joined() const { return join_ == Join::Joined; }
  bool closing() const { return close_ != Close::Open; }
  bool drained() const { return close_ == Close::Drained; }

  // The rendezvous ended (once; false if it had already).
  bool finishJoin(bool ok) {
    if (join_ != Join::Pending) return false;
    join_ = ok ? Join::Joined : Join::Failed;
    return true;
  }

  // The drain: it ends when every link has closed, or when a period passes
  // with no link closing meanwhile; links that keep closing extend it, up to
  // `limit`.
  void beginDrain(Clock::time_point limit) {
    close_ = Close::Draining;
    limit_ = limit;
    lastOpen_ = -1;
    progress_ = false;
  }
  // `open` links (not counting those to aborted peers) are still open. True
  // when none is: the drain is over (Drained).
  bool linksOpen(int open) {
    if (close_ != Close::Draining) return close_ == Close::Drained;
    if (lastOpen_ >= 0 && open < lastOpen_) progress_ = true;
    lastOpen_ = open;
    if (open) return false;
    close_ = Close::Drained;
    return true;
  }
  // A drain period of length `period` passed: true if the drain goes on
  // for another one (a link closed during this one and the limit allows).
  bool extend(Clock::time_point now, Clock::duration period) {
    if (close_ != Close::Draining || !progress_ || now + period > limit_) return false;
    progress_ = false;
    return true;
  }

 private:
  Join join_ = Join::Pending;
  Close close_ = Close::Open;
  Clock::time_point limit_{};  // a drain making progress ends by then
  int lastOpen_ = -1;          // links still open at the last check
  bool progress_ = false;      // a link closed since the current period began
};

}  // namespace tether
