// tether-status's output: who holds the others up, a line per rank (or, for
// many ranks, one per group of ranks in the same state and call), and JSON.
#pragma once

#include <string>
#include <vector>

#include "roll_call.hpp"

namespace tether::status {

// A rank that others wait for, directly or through ranks that wait in turn,
// and that does not answer, is lost, or is not in a call: the end of their
// chain of waits.
struct Behind {
  int rank = 0;
  int waiters = 0;  // alive ranks whose chain of waits ends there
};

// Most waited for first.
std::vector<Behind> findBehind(const RollCall& rc);
// One line per rank when `perRank`, else grouped by state and call.
std::string text(const RollCall& rc, bool perRank);
std::string json(const RollCall& rc);

}  // namespace tether::status
