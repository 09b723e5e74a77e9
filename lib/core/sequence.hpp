// The progress-thread half of a communicator's state (the calling-thread half
// is in communicator.hpp, which owns this): which collectives have started
// here and which still run, so that an arriving frame can be told apart as
// early (stash it), current (deliver it), finished or foreign (Protocol error).
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/layer.hpp"

TETHER_LAYER(6, "core");

namespace tether {

class Op;
struct CommCounters;  // observe.hpp

// The collectives running on one communicator, by id (ascending): a sorted
// vector, so a call adds no node (one runs at a time unless nonblocking).
class RunningCalls {
 public:
  using Entry = std::pair<std::uint64_t, Op*>;
  using iterator = std::vector<Entry>::iterator;
  using const_iterator = std::vector<Entry>::const_iterator;

  iterator begin() { return v_.begin(); }
  iterator end() { return v_.end(); }
  const_iterator begin() const { return v_.begin(); }
  const_iterator end() const { return v_.end(); }
  bool empty() const { return v_.empty(); }
  std::size_t size() const { return v_.size(); }

  iterator find(std::uint64_t coll) {
    auto it = lower(coll);
    return it != v_.end() && it->first == coll ? it : v_.end();
  }
  const_iterator find(std::uint64_t coll) const { return const_cast<RunningCalls*>(this)->find(coll); }
  Op*& operator[](std::uint64_t coll) {
    auto it = lower(coll);
    if (it == v_.end() || it->first != coll) it = v_.insert(it, Entry{coll, nullptr});
    return it->second;
  }
  void erase(std::uint64_t coll) {
    auto it = find(coll);
    if (it != v_.end()) v_.erase(it);
  }

 private:
  iterator lower(std::uint64_t coll) {
    // Ids grow: the newest is nearly always last.
    if (v_.empty() || v_.back().first < coll) return v_.end();
    auto it = v_.begin();
    while (it != v_.end() && it->first < coll) ++it;
    return it;
  }
  std::vector<Entry> v_;
};

struct CollectiveSeq {
  std::uint64_t started = 0;  // highest collective id started on this rank
  RunningCalls running;       // started and not yet ended
  std::exception_ptr poison;             // a protocol error seen while none ran
  // The latest collective that failed here, for a peer's stall probe.
  std::uint64_t failedColl = 0;
  std::string failedWhat;
  int failedPeer = -1;  // the rank its error named
  // The communicator's counters: frames that arrive before their receive is
  // posted are counted through here (set before the sequence is shared).
  std::shared_ptr<CommCounters> counters;

  bool finished(std::uint64_t coll) const { return coll <= started && running.find(coll) == running.end(); }
};

}  // namespace tether
