// The progress-thread half of a communicator's state (the calling-thread half
// is in communicator.hpp, which owns this): which collectives have started
// here and which still run, so that an arriving frame can be told apart as
// early (stash it), current (deliver it), finished or foreign (Protocol error).
#pragma once

#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <string>

#include "base/layer.hpp"

TETHER_LAYER(6, "core");

namespace tether {

class Op;
struct CommCounters;  // observe.hpp

struct CollectiveSeq {
  std::uint64_t started = 0;             // highest collective id started on this rank
  std::map<std::uint64_t, Op*> running;  // started and not yet ended
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
