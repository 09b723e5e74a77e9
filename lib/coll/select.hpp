// Which algorithm a collective uses: the table's automatic choice
// (tether/detail/coll/table.hpp), unless TETHER_ALGO names one; its tuning
// keys too (tree_radix, large_bytes, chunk_bytes; docs/configuration.md).
// Set once per process; a bad value is rejected when a bootstrap starts.
// The base layer's table of variables lists TETHER_ALGO as text: its form
// and the algorithm names are checked here, not there.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "base/layer.hpp"
#include "tether/detail/coll/settings.hpp"
#include "tether/detail/coll/table.hpp"

TETHER_LAYER(5, "coll");

namespace tether::coll {

namespace dc = detail::coll;

// This process's settings (TETHER_ALGO; checkSettings below), from which
// a communicator chooses its algorithms (dc::Choice).
const dc::Settings& settings();
// Checks `text`, TETHER_ALGO as a bootstrap's configuration read it (nullopt:
// unset); throws Error{InvalidArgument} naming the variable, `who` ("rank 2: ")
// in front. The first text checked becomes the process-wide setting (one
// algorithm table per process); later bootstraps' are checked only.
void checkSettings(const std::optional<std::string>& text, std::string_view who);
// This process's settings that decide a collective's algorithm and plan, as
// text ("allgather=ring,alltoall=auto,...,chunk_bytes=262144"): every rank of
// a world must have the same (bring-up compares their fingerprints).
std::string planSettings();

}  // namespace tether::coll
