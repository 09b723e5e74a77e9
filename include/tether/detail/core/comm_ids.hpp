// tether/detail/core/comm_ids.hpp — the ids of a communicator's children, one
// rule in every world. Each rank of a child computes its id alone from what
// all of them agree on — the parent's id and, for split(), the split's
// collective id and the color; for a subset barrier, the subset's parent
// ranks — so no message carries it. A splitmix64 finaliser mixes them: two
// communicators of one job share an id with chance about 2^-64 per pair.
// Errors name such a communicator by its id ("allgather#1 (comm
// 5d2e9a01c0ffee00)", tether/detail/wire/op.hpp). Header-only, C++17.
#pragma once

#include <cstdint>
#include <vector>

namespace tether {
namespace detail {
namespace core {

// `seed` and `value` mixed (splitmix64's finaliser).
inline std::uint64_t mix(std::uint64_t seed, std::uint64_t value) {
  std::uint64_t z = seed ^ (value + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// The child of communicator `parent` that split() collective `splitId` made
// for `color`.
inline std::uint64_t splitComm(std::uint64_t parent, std::uint64_t splitId, int color) {
  constexpr std::uint64_t kSplit = 1;
  return mix(mix(mix(parent, kSplit), splitId), static_cast<std::uint32_t>(color));
}

// The communicator of a subset barrier of `parent` over `sortedRanks` (its
// ranks, ascending).
inline std::uint64_t subsetComm(std::uint64_t parent, const std::vector<int>& sortedRanks) {
  constexpr std::uint64_t kSubset = 2;
  std::uint64_t id = mix(mix(parent, kSubset), sortedRanks.size());
  for (int r : sortedRanks) id = mix(id, static_cast<std::uint32_t>(r));
  return id;
}

}  // namespace core
}  // namespace detail
}  // namespace tether
