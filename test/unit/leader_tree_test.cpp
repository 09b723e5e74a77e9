// The host leaders' tree of the host-local rendezvous (rendezvous/leader_tree.hpp):
// positions in rank order under the root, each rank's parent and children,
// and which losses still leave ranks without the table.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <vector>

#include "rendezvous/leader_tree.hpp"

using tether::rdv::LeaderTree;

TEST_CASE("the host leaders' tree: parents, children, acknowledgements and pending subtrees", "[unit][host-local]") {
  // Radix 2 over positions 0 (the root) .. 5: 0 -> {4, 2, 1}, 4 -> {5}, 2 -> {3}.
  const std::vector<std::uint32_t> leaders{3, 5, 9, 12, 20};
  LeaderTree root(leaders, 2, 0);
  CHECK(root.parent() == -1);
  CHECK(root.children() == std::vector<int>{12, 5, 3});
  CHECK_FALSE(root.complete());
  CHECK(root.pending(20));  // below 12
  CHECK(root.pending(9));   // below 5
  CHECK(root.pending(3));
  CHECK_FALSE(root.pending(7));  // not a leader
  CHECK_FALSE(root.pending(0));
  CHECK(root.acknowledged(12));
  CHECK_FALSE(root.acknowledged(12));  // once
  CHECK_FALSE(root.acknowledged(20));  // not a child
  CHECK_FALSE(root.pending(20));       // its part of the tree has the table
  CHECK(root.pending(9));
  CHECK(root.waiting() == std::vector<int>{5, 3});
  CHECK(root.acknowledged(5));
  CHECK(root.acknowledged(3));
  CHECK(root.complete());
  CHECK(root.waiting().empty());

  LeaderTree mid(leaders, 2, 12);
  CHECK(mid.parent() == 0);
  CHECK(mid.children() == std::vector<int>{20});
  CHECK(mid.isChild(20));
  CHECK_FALSE(mid.isChild(9));
  CHECK(mid.pending(20));
  CHECK_FALSE(mid.pending(9));  // not below 12
  CHECK_FALSE(mid.pending(0));

  LeaderTree leaf(leaders, 2, 9);
  CHECK(leaf.parent() == 5);
  CHECK(leaf.children().empty());
  CHECK(leaf.complete());  // a leaf answers at once

  CHECK_THROWS_AS(LeaderTree(leaders, 2, 7), std::invalid_argument);  // not a leader of this tree
  LeaderTree alone({}, 8, 0);                                         // rank 0 leads every group
  CHECK(alone.children().empty());
  CHECK(alone.complete());
}
