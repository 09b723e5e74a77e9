#include "rendezvous/leader_tree.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "rendezvous/rendezvous.hpp"

namespace tether::rdv {

LeaderTree::LeaderTree(std::vector<std::uint32_t> leaders, int radix, int self)
    : leaders_(std::move(leaders)), radix_(radix), position_(positionOf(self)) {
  if (position_ < 0) throw std::invalid_argument("the host leaders' tree does not list rank " + std::to_string(self));
  parent_ = position_ == 0 ? -1 : rankAt(treeParent(position_, radix_));
  for (int c : treeChildren(position_, static_cast<int>(leaders_.size()) + 1, radix_)) children_.push_back(rankAt(c));
  acked_.assign(children_.size(), 0);
}

int LeaderTree::positionOf(int rank) const {
  if (rank == 0) return 0;
  auto it = std::lower_bound(leaders_.begin(), leaders_.end(), static_cast<std::uint32_t>(rank));
  if (it == leaders_.end() || *it != static_cast<std::uint32_t>(rank)) return -1;
  return static_cast<int>(it - leaders_.begin()) + 1;
}

std::size_t LeaderTree::indexOf(int child) const {
  return static_cast<std::size_t>(std::find(children_.begin(), children_.end(), child) - children_.begin());
}

bool LeaderTree::acknowledged(int child) {
  const std::size_t i = indexOf(child);
  if (i == children_.size() || acked_[i]) return false;
  acked_[i] = 1;
  return true;
}

bool LeaderTree::complete() const {
  return std::all_of(acked_.begin(), acked_.end(), [](char a) { return a != 0; });
}

std::vector<int> LeaderTree::waiting() const {
  std::vector<int> out;
  for (std::size_t i = 0; i < children_.size(); ++i)
    if (!acked_[i]) out.push_back(children_[i]);
  return out;
}

bool LeaderTree::pending(int rank) const {
  int p = positionOf(rank);
  if (p <= 0 || p == position_) return false;
  // Up to the child of this rank whose subtree holds it (none: not below).
  for (int up = treeParent(p, radix_); up != position_; up = treeParent(p, radix_)) {
    if (up <= 0) return false;
    p = up;
  }
  return !acked_[indexOf(rankAt(p))];
}

}  // namespace tether::rdv
