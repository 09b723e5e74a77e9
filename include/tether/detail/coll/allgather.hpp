// tether/detail/coll/allgather.hpp — all-gather algorithms, in place on Out:
// rank r's block is at out(r * bytes) on entry; every block is filled on return.
// Header-only, C++17.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "tether/detail/coll/knomial.hpp"
#include "tether/detail/coll/leaders.hpp"
#include "tether/detail/coll/plan.hpp"

namespace tether {
namespace detail {
namespace coll {

// Bruck: ceil(log2 N) rounds for any N; N * ceil(log2 N) messages in all.
// Scratch block i holds rank (r + i) % N's data.
inline void allgatherBruck(Plan& p, std::size_t bytes) {
  const int n = p.size(), r = p.rank();
  const Ref tmp = p.scratch(static_cast<std::size_t>(n) * bytes);
  p.copy(tmp, out(static_cast<std::size_t>(r) * bytes), bytes);
  std::uint32_t step = 0;
  for (int dist = 1; dist < n; dist *= 2, ++step) {
    const std::size_t blocks = static_cast<std::size_t>(std::min(dist, n - dist));
    p.recv((r + dist) % n, step, tmp + static_cast<std::size_t>(dist) * bytes, blocks * bytes);
    p.send((r - dist + n) % n, step, tmp, blocks * bytes);
    p.settle();
  }
  for (int i = 1; i < n; ++i)
    p.copy(out(static_cast<std::size_t>((r + i) % n) * bytes), tmp + static_cast<std::size_t>(i) * bytes, bytes);
}

// Ring: N - 1 rounds; each rank sends and receives one block per round,
// straight from and into the caller's buffer. For large blocks.
inline void allgatherRing(Plan& p, std::size_t bytes) {
  const int n = p.size(), r = p.rank();
  const int right = (r + 1) % n, left = (r - 1 + n) % n;
  for (int step = 0; step < n - 1; ++step) {
    const int sendBlock = (r - step + n) % n, recvBlock = (r - step - 1 + n) % n;
    p.recv(left, static_cast<std::uint32_t>(step), out(static_cast<std::size_t>(recvBlock) * bytes), bytes);
    p.send(right, static_cast<std::uint32_t>(step), out(static_cast<std::size_t>(sendBlock) * bytes), bytes);
    p.settle();
  }
}

// Linear: one round; every rank sends its block to every other rank at once.
inline void allgatherLinear(Plan& p, std::size_t bytes) {
  const int n = p.size(), r = p.rank();
  for (int i = 1; i < n; ++i) {
    const int src = (r - i + n) % n, dst = (r + i) % n;
    p.recv(src, 0, out(static_cast<std::size_t>(src) * bytes), bytes);
    p.send(dst, 0, out(static_cast<std::size_t>(r) * bytes), bytes);
  }
}

// Tree: gather up a k-nomial tree to rank 0 (step 0), then send the whole
// buffer back down (step 1): 2(N - 1) messages instead of N * ceil(log2 N).
// Each rank posts the receives from all its children at once, so it wakes
// about once per phase. Wins when ranks outnumber cores; a radix of at
// least N makes the tree flat.
inline void allgatherTree(Plan& p, std::size_t bytes, int radix) {
  const int n = p.size(), r = p.rank();
  const KnomialNode node = knomialNode(r, n, radix);
  auto block = [&](int first) { return out(static_cast<std::size_t>(first) * bytes); };
  for (const auto& ch : node.children) p.recv(ch.rank, 0, block(ch.rank), static_cast<std::size_t>(ch.span) * bytes);
  p.settle();
  const std::size_t all = static_cast<std::size_t>(n) * bytes;
  if (node.parent >= 0) {
    p.send(node.parent, 0, block(r), static_cast<std::size_t>(node.span) * bytes);
    p.settle();  // the receive below covers the block being sent (a small send settles at once)
    p.recv(node.parent, 1, out(), all);
    p.settle();
  }
  for (const auto& ch : node.children) p.send(ch.rank, 1, out(), all);
}

// Leaders: groups of G consecutive ranks (leadersGroup, leaders.hpp), the first
// of each leading (as the leaders all-to-all, alltoall_leaders.hpp). Members send
// their block to their leader (step 0); leaders send their group's blocks to
// every other leader (step 1); each leader sends the whole buffer to its
// members (step 2). Three rounds, about 3N messages, a leader talks to
// G - 1 members and M - 1 leaders, a member to its leader only.
inline void allgatherLeaders(Plan& p, std::size_t bytes) {
  const int n = p.size(), r = p.rank(), G = leadersGroup(n);
  const int groups = (n + G - 1) / G, leader = r / G * G;
  auto size = [&](int group) { return std::min(G, n - group * G); };
  auto block = [&](int first) { return out(static_cast<std::size_t>(first) * bytes); };
  const std::size_t all = static_cast<std::size_t>(n) * bytes;
  if (r != leader) {
    p.send(leader, 0, block(r), bytes);
    p.settle();  // the receive below covers the block being sent (a small send settles at once)
    p.recv(leader, 2, out(), all);
    return;
  }
  const int sz = size(r / G);
  for (int m = 1; m < sz; ++m) p.recv(leader + m, 0, block(leader + m), bytes);
  p.settle();
  for (int h = 0; h < groups; ++h) {
    if (h * G == leader) continue;
    p.recv(h * G, 1, block(h * G), static_cast<std::size_t>(size(h)) * bytes);
    p.send(h * G, 1, block(leader), static_cast<std::size_t>(sz) * bytes);
  }
  p.settle();
  for (int m = 1; m < sz; ++m) p.send(leader + m, 2, out(), all);
}

}  // namespace coll
}  // namespace detail
}  // namespace tether
