// The tree of host leaders that the host-local rendezvous sends its table
// down (host_local.cpp): the k-nomial tree of treeChildren/treeParent over
// positions, 0 the root (rank 0), i the leader leaders[i - 1] (ascending);
// and, seen from one rank of it, which of its children have acknowledged
// that their part of the tree holds the table. Progress thread only.
#pragma once

#include <cstdint>
#include <vector>

#include "base/layer.hpp"

TETHER_LAYER(4, "rendezvous");

namespace tether::rdv {

class LeaderTree {
 public:
  // The tree seen from `self` (0 or one of `leaders`, which must be
  // ascending and without rank 0); throws std::invalid_argument if `self`
  // is not in it.
  LeaderTree(std::vector<std::uint32_t> leaders, int radix, int self);

  int radix() const { return radix_; }
  const std::vector<std::uint32_t>& leaders() const { return leaders_; }
  int parent() const { return parent_; }  // a rank; -1 at the root
  const std::vector<int>& children() const { return children_; }
  bool isChild(int rank) const { return indexOf(rank) < children_.size(); }

  // `child` acknowledged; false if it is no child or did so already.
  bool acknowledged(int child);
  // Every child has acknowledged (at once for a leaf).
  bool complete() const;
  // The children that have not acknowledged yet.
  std::vector<int> waiting() const;
  // `rank` is a leader below this one whose part of the tree (the subtree of
  // one of this rank's children) has not acknowledged yet: losing it now
  // leaves ranks without the table.
  bool pending(int rank) const;

 private:
  int positionOf(int rank) const;  // -1 if not in the tree
  int rankAt(int position) const { return position == 0 ? 0 : static_cast<int>(leaders_[position - 1]); }
  std::size_t indexOf(int child) const;

  std::vector<std::uint32_t> leaders_;
  int radix_;
  int position_;
  int parent_;
  std::vector<int> children_;  // ranks, the largest subtrees first
  std::vector<char> acked_;    // per child
};

}  // namespace tether::rdv
