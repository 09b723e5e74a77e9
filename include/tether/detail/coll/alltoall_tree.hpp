// tether/detail/coll/alltoall_tree.hpp — all-to-all by gather, transpose and
// scatter on the k-nomial tree of the tree all-gather (knomial.hpp): each rank
// talks only to its parent and its children, 2(N - 1) messages in all. For
// small blocks when ranks outnumber cores, where the number of messages (system
// calls and wake-ups), not their size, sets the time. Layout as in alltoall:
// block for rank d leaves from in(d * bytes), block from rank s lands at
// out(s * bytes); In and Out do not overlap. Header-only, C++17.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tether/detail/coll/knomial.hpp"
#include "tether/detail/coll/plan.hpp"

namespace tether {
namespace detail {
namespace coll {

// A row is one rank's N blocks (N * bytes). Up (step 0): a subtree [x, x + span)
// sends its rows by source rank, one message to the parent; a child's rows are
// contiguous in its parent's buffer because its subtree is a contiguous range.
// Rank 0 transposes: row d of the result holds the blocks for rank d, by
// source. Down (step 1): each child gets the rows of its subtree, one message;
// a leaf's row is its Out, received in place.
inline void alltoallTree(Plan& p, std::size_t bytes, int radix) {
  const int n = p.size(), r = p.rank();
  const KnomialNode node = knomialNode(r, n, radix);
  const std::size_t row = static_cast<std::size_t>(n) * bytes;
  auto rows = [&](int count) { return static_cast<std::size_t>(count) * row; };

  if (node.parent >= 0 && node.children.empty()) {  // leaf
    p.send(node.parent, 0, in(), row);
    p.recv(node.parent, 1, out(), row);
    return;
  }
  if (node.parent >= 0) {  // inner rank: rows [r, r + span) up, then down
    const Ref gathered = p.scratch(rows(node.span)), spread = p.scratch(rows(node.span));
    p.copy(gathered, in(), row);
    for (const auto& ch : node.children) p.recv(ch.rank, 0, gathered + rows(ch.rank - r), rows(ch.span));
    p.settle();
    p.send(node.parent, 0, gathered, rows(node.span));
    p.recv(node.parent, 1, spread, rows(node.span));
    p.settle();
    p.copy(out(), spread, row);
    for (const auto& ch : node.children) p.send(ch.rank, 1, spread + rows(ch.rank - r), rows(ch.span));
    return;
  }
  // Rank 0: rows 1 .. N-1 arrive (row s at gathered + (s - 1) rows); its own
  // row stays in In.
  p.copy(out(), in(), bytes);
  if (n == 1) return;
  const Ref gathered = p.scratch(rows(n - 1)), spread = p.scratch(rows(n - 1));
  for (const auto& ch : node.children) p.recv(ch.rank, 0, gathered + rows(ch.rank - 1), rows(ch.span));
  p.settle();
  // Column d of the gathered rows (rank s's block for d at row s - 1) is
  // one CopyBlocks step: row d of the result, by source.
  const auto rowStride = static_cast<std::ptrdiff_t>(row), one = static_cast<std::ptrdiff_t>(bytes);
  p.copyBlocks(out(bytes), one, gathered, rowStride, bytes, static_cast<std::size_t>(n - 1));
  for (int d = 1; d < n; ++d) {
    const Ref to = spread + rows(d - 1), column = gathered + static_cast<std::size_t>(d) * bytes;
    p.copy(to, in(static_cast<std::size_t>(d) * bytes), bytes);
    p.copyBlocks(to + bytes, one, column, rowStride, bytes, static_cast<std::size_t>(n - 1));
  }
  for (const auto& ch : node.children) p.send(ch.rank, 1, spread + rows(ch.rank - 1), rows(ch.span));
}

}  // namespace coll
}  // namespace detail
}  // namespace tether
