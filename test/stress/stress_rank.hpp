// stress_rank.hpp — the body of one forked stress rank.
#pragma once

#include <string>

#include "stress_run.hpp"
#include "tether/unique_id.hpp"

namespace tether::stress {

// Moves the calling thread into the named network namespace (/var/run/netns).
void enterNetns(const std::string& name);

// Runs rank `rank` to the end; returns its report lines (OPS/BLOCKS/
// MISMATCHES/BYTES/MISMATCH). Throws on any failure.
std::string rankBody(int rank, const UniqueId& id, const StressConfig& config);

}  // namespace tether::stress
