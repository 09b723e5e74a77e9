// tether/detail/coll/alltoall_leaders.hpp — all-to-all through group leaders:
// the ranks are cut into groups of G consecutive ranks whose first rank leads
// (leadersGroup, leaders.hpp: at least ceil(sqrt(N)), at most 48 links where
// that is possible). Three rounds: every member sends its row (its N blocks) to
// its leader; the leaders exchange tiles (the blocks from one group to
// another, one message per pair of leaders); each leader sends each member
// its N received blocks. 2(N - M) + M(M - 1) messages for M
// groups, every block moves at most three times, and a leader holds
// 3 G N blocks, not the tree's N^2 (alltoall_tree.hpp), so it runs at 1,024
// ranks within the memory budget. A member talks to its leader only, a leader
// to its G - 1 members and M - 1 leaders. For small blocks when ranks
// outnumber cores. Layout as in alltoall: block for rank d leaves from
// in(d * bytes), block from rank s lands at out(s * bytes). Header-only, C++17.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "tether/detail/coll/leaders.hpp"
#include "tether/detail/coll/plan.hpp"

namespace tether {
namespace detail {
namespace coll {

// Blocks a leader holds at once: its group's rows (then its members' results),
// the tiles received and the tiles sent.
inline std::uint64_t alltoallLeadersBlocks(int n) {
  return 3 * static_cast<std::uint64_t>(leadersGroup(n)) * static_cast<std::uint64_t>(n);
}

inline void alltoallLeaders(Plan& p, std::size_t bytes) {
  const int n = p.size(), r = p.rank(), G = leadersGroup(n);
  const int groups = (n + G - 1) / G, g = r / G, leader = g * G;
  auto size = [&](int group) { return std::min(G, n - group * G); };
  const int sz = size(g);
  const std::size_t row = static_cast<std::size_t>(n) * bytes;
  auto blocks = [&](long long count) { return static_cast<std::size_t>(count) * bytes; };

  if (r != leader) {  // a member: its row up (step 0), its result down (step 2)
    p.send(leader, 0, in(), row);
    p.recv(leader, 2, out(), row);
    return;
  }
  // U: the group's rows, member m's at U + m rows. X: an N x sz matrix, row s
  // the blocks from rank s for the group's members; the tile from group h is
  // its rows h G .. h G + size(h), contiguous.
  const Ref U = p.scratch(blocks(static_cast<long long>(sz) * n));
  const Ref X = p.scratch(blocks(static_cast<long long>(n) * sz));
  p.copy(U, in(), row);
  for (int m = 1; m < sz; ++m) p.recv(leader + m, 0, U + static_cast<std::size_t>(m) * row, row);
  p.settle();

  // Tiles (step 1): to leader h, the blocks from this group's members for h's
  // members, by source: sz rows of size(h) blocks.
  const Ref T = p.scratch(blocks(static_cast<long long>(sz) * n));  // the tiles to send, by group
  for (int h = 0; h < groups; ++h) {
    const std::size_t rowsBefore = static_cast<std::size_t>(h) * static_cast<std::size_t>(G);
    const Ref into = X + blocks(static_cast<long long>(rowsBefore) * sz);
    const Ref tile = T + blocks(static_cast<long long>(rowsBefore) * sz);
    const auto width = static_cast<std::ptrdiff_t>(blocks(size(h)));
    p.copyBlocks(h == g ? into : tile, width, U + blocks(static_cast<long long>(h) * G),
                 static_cast<std::ptrdiff_t>(row), blocks(size(h)), static_cast<std::size_t>(sz));
    if (h == g) continue;
    p.recv(h * G, 1, into, blocks(static_cast<long long>(size(h)) * sz));
    p.send(h * G, 1, tile, blocks(static_cast<long long>(sz) * size(h)));
  }
  p.settle();

  // Results (step 2): member k's is column k of X, staged in U (free again).
  const auto width = static_cast<std::ptrdiff_t>(blocks(sz)), one = static_cast<std::ptrdiff_t>(bytes);
  p.copyBlocks(out(), one, X, width, bytes, static_cast<std::size_t>(n));
  for (int k = 1; k < sz; ++k) {
    const Ref to = U + static_cast<std::size_t>(k) * row;
    p.copyBlocks(to, one, X + blocks(k), width, bytes, static_cast<std::size_t>(n));
    p.send(leader + k, 2, to, row);
  }
}

}  // namespace coll
}  // namespace detail
}  // namespace tether
