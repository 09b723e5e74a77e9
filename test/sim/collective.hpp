// Replays collective plans (planner.hpp) on the engine, with the same
// semantics as the TCP world's replay (lib/core/op_run.cpp): sends and
// receives are posted in plan order; a settle lets the rank go on only when
// every receive it posted has arrived (matched on the full key: source,
// call, step) and every send has left (eager: copied; large: sent); local
// copies cost CPU. Frames that arrive before their receive is posted wait,
// as tether's mailbox keeps them.
#pragma once

#include "engine.hpp"
#include "planner.hpp"
#include "report.hpp"

namespace tether::sim {

// Runs `spec` on every rank starting at engine.now() (all ranks enter
// together; with spec.calls > 1 each rank starts its next call when its last
// returned, as tether-bench's loop does). Links opened persist in `engine`.
// Throws std::runtime_error if a rank never finishes (names where it waits).
OpResult runCollective(Engine& engine, const CollectiveSpec& spec, bool cpuBound);

}  // namespace tether::sim
