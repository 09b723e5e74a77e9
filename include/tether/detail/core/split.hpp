// tether/detail/core/split.hpp — split membership: from every rank's
// (color, key) pair, gathered by the split collective (coll/front.hpp's
// splitCall), the members of this rank's child communicator, in child rank
// order: by key, ties by parent rank. Used by TcpBootstrap and the testing
// world, so both give every rank the same child rank. Header-only, C++17.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tether {
namespace detail {
namespace core {

struct SplitMembers {
  std::vector<int> parentRanks;  // child rank -> parent rank
  int rank = -1;                 // this rank's child rank
};

// `pairs`: color and key of parent rank p at 2p and 2p + 1; `rank` calls with `color`.
inline SplitMembers splitMembers(const std::vector<std::int32_t>& pairs, int rank, int color) {
  SplitMembers m;
  const int size = static_cast<int>(pairs.size() / 2);
  for (int p = 0; p < size; ++p)
    if (pairs[2 * static_cast<std::size_t>(p)] == color) m.parentRanks.push_back(p);
  std::stable_sort(m.parentRanks.begin(), m.parentRanks.end(), [&](int a, int b) {
    return pairs[2 * static_cast<std::size_t>(a) + 1] < pairs[2 * static_cast<std::size_t>(b) + 1];
  });
  for (std::size_t i = 0; i < m.parentRanks.size(); ++i)
    if (m.parentRanks[i] == rank) m.rank = static_cast<int>(i);
  return m;
}

}  // namespace core
}  // namespace detail
}  // namespace tether
