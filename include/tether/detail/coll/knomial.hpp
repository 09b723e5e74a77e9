// tether/detail/coll/knomial.hpp — the k-nomial tree rooted at rank 0 that the
// tree all-gather and the tree barrier run on.
// Radix 2 is the binomial tree; a radix of at least N is
// the flat tree (everyone talks to rank 0). Every subtree is a contiguous
// rank range [r, r + span), so a gathered subtree is one contiguous block.
#pragma once

#include <algorithm>
#include <vector>

namespace tether {
namespace detail {
namespace coll {

struct KnomialNode {
  struct Child {
    int rank;
    int span;  // ranks in its subtree: [rank, rank + span)
  };
  int parent = -1;              // -1 for the root
  int span = 1;                 // ranks in this node's subtree, itself included
  std::vector<Child> children;  // highest level (farthest rank) first, as the
                                // binomial broadcast orders them
};

inline KnomialNode knomialNode(int rank, int size, int radix) {
  KnomialNode node;
  radix = std::max(radix, 2);
  long long level = 1;  // k^j: the subtree size of a child at this level
  // A rank keeps gathering while its digit at this level is 0; a non-zero
  // digit makes it the child of the rank with that digit cleared.
  while (level < size && (rank / level) % radix == 0) level *= radix;
  if (level < size) node.parent = rank - static_cast<int>((rank / level) % radix * level);
  node.span = static_cast<int>(std::min<long long>(level, size - rank));
  for (long long l = level / radix; l >= 1; l /= radix)
    for (int i = radix - 1; i >= 1; --i) {
      long long child = rank + i * l;
      if (child < size)
        node.children.push_back({static_cast<int>(child), static_cast<int>(std::min<long long>(l, size - child))});
    }
  return node;
}

}  // namespace coll
}  // namespace detail
}  // namespace tether
