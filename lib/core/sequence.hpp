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

#include "tether/detail/core/failures.hpp"
#include "tether/detail/core/sequence_guard.hpp"

TETHER_LAYER(6, "core");

namespace tether {

class Op;
struct CommCounters;  // observe.hpp

// A communicator's collectives here (tether/detail/core/sequence_guard.hpp),
// and what this world adds to them.
struct CollectiveSeq : detail::core::Sequence<Op> {
  // `names`: how its communicator's errors name ranks.
  explicit CollectiveSeq(detail::core::RankNames names) : Sequence(std::move(names)) {}

  // The latest collective that failed here, for a peer's stall probe.
  std::uint64_t failedColl = 0;
  std::string failedWhat;
  int failedPeer = -1;  // the rank its error named, as a world rank
  // The communicator's counters: frames that arrive before their receive is
  // posted are counted through here (set before the sequence is shared).
  std::shared_ptr<CommCounters> counters;
};

}  // namespace tether
