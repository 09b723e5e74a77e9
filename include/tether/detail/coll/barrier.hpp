// tether/detail/coll/barrier.hpp — barrier algorithms (empty frames).
// Header-only, C++17.
#pragma once

#include <cstdint>

#include "tether/detail/coll/knomial.hpp"
#include "tether/detail/coll/plan.hpp"

namespace tether {
namespace detail {
namespace coll {

// Dissemination: ceil(log2 N) rounds; in round k each rank signals r + 2^k
// and waits for r - 2^k.
inline void barrierDissemination(Plan& p) {
  const int n = p.size(), r = p.rank();
  std::uint32_t step = 0;
  for (int dist = 1; dist < n; dist *= 2, ++step) {
    p.recv((r - dist + n) % n, step, out(), 0);
    p.send((r + dist) % n, step, out(), 0);
    p.settle();
  }
}

// Tree: up a k-nomial tree to rank 0 (step 0) and back down (step 1):
// 2(N - 1) messages instead of N * ceil(log2 N), for when CPU time is scarce.
inline void barrierTree(Plan& p, int radix) {
  const KnomialNode node = knomialNode(p.rank(), p.size(), radix);
  for (const auto& ch : node.children) p.recv(ch.rank, 0, out(), 0);
  p.settle();
  if (node.parent >= 0) {
    p.send(node.parent, 0, out(), 0);
    p.recv(node.parent, 1, out(), 0);
    p.settle();
  }
  for (const auto& ch : node.children) p.send(ch.rank, 1, out(), 0);
}

}  // namespace coll
}  // namespace detail
}  // namespace tether
