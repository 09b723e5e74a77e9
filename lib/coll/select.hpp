// Which algorithm a collective uses: the table's automatic choice
// (tether/detail/coll/table.hpp), unless TETHER_ALGO_* names one; tuning from
// TETHER_ALGO_TREE_RADIX, TETHER_ALGO_LARGE_BYTES, TETHER_PIPELINE_CHUNK_BYTES
// (docs/configuration.md). Read once per process; bad values are rejected
// when the first communicator is made.
#pragma once

#include "base/layer.hpp"
#include "tether/detail/coll/table.hpp"

TETHER_LAYER(5, "coll");

namespace tether::coll {

namespace dc = detail::coll;

// The shape of a communicator with these settings applied.
dc::Shape shape(int rank, int size, bool cpuBound);
// The algorithm for `call` on a communicator of `shape`.
const dc::Algorithm& choose(const dc::Shape& shape, const dc::Call& call);
// Reads and checks the settings now; throws Error{InvalidArgument} naming the variable.
void checkSettings();

}  // namespace tether::coll
