// The k-nomial tree behind the tree all-gather and tree barrier: every rank
// but 0 has one parent, subtrees are the contiguous ranges the all-gather
// copies as one block, and the depth is logarithmic in the radix.
#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "tether/detail/coll/knomial.hpp"

using tether::detail::coll::knomialNode;

TEST_CASE("k-nomial tree: parents, contiguous subtrees, depth", "[unit][knomial]") {
  for (int radix : {2, 3, 4, 8, 64}) {
    for (int n = 1; n <= 70; ++n) {
      INFO("radix " << radix << " n " << n);
      std::vector<int> parentOf(n, -2);
      for (int r = 0; r < n; ++r) {
        auto node = knomialNode(r, n, radix);
        if (r == 0) {
          REQUIRE(node.parent == -1);
          REQUIRE(node.span == n);
        } else {
          REQUIRE(node.parent >= 0);
          REQUIRE(node.parent < r);
        }
        // Children cover [r + 1, r + span) exactly, as contiguous blocks,
        // highest level (farthest rank) first, and each child's own view agrees.
        int covered = r + 1;
        std::vector<int> starts;
        for (const auto& ch : node.children) {
          starts.push_back(ch.rank);
          auto child = knomialNode(ch.rank, n, radix);
          REQUIRE(child.parent == r);
          REQUIRE(child.span == ch.span);
          parentOf[ch.rank] = r;
        }
        std::sort(starts.begin(), starts.end());
        for (int s : starts) {
          REQUIRE(s == covered);
          covered += knomialNode(s, n, radix).span;
        }
        REQUIRE(covered == r + node.span);
        for (std::size_t i = 1; i < node.children.size(); ++i)
          REQUIRE(node.children[i - 1].rank > node.children[i].rank);
      }
      for (int r = 1; r < n; ++r) REQUIRE(parentOf[r] == knomialNode(r, n, radix).parent);
      // Depth: at most ceil(log_radix n) edges from any rank to the root.
      int maxDepth = 0;
      for (long long p = 1; p < n; p *= radix) ++maxDepth;
      for (int r = 0; r < n; ++r) {
        int depth = 0;
        for (int x = r; x != 0; x = knomialNode(x, n, radix).parent) ++depth;
        REQUIRE(depth <= maxDepth);
      }
    }
  }
}

TEST_CASE("k-nomial tree: a radix of at least N is flat", "[unit][knomial]") {
  const int n = 9;
  auto root = knomialNode(0, n, 64);
  REQUIRE(root.children.size() == static_cast<std::size_t>(n - 1));
  for (int r = 1; r < n; ++r) {
    auto node = knomialNode(r, n, 64);
    CHECK(node.parent == 0);
    CHECK(node.children.empty());
    CHECK(node.span == 1);
  }
  // Radix 2 is the binomial tree: rank 4's parent is 0, rank 6's is 4.
  CHECK(knomialNode(4, 8, 2).parent == 0);
  CHECK(knomialNode(6, 8, 2).parent == 4);
  CHECK(knomialNode(7, 8, 2).parent == 6);
  CHECK(knomialNode(4, 8, 2).span == 4);
}
