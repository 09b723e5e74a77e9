// Dissemination barrier: ceil(log2 N) rounds of empty frames; in round k each
// rank signals r + 2^k and waits for r - 2^k.
#include "collectives/context.hpp"
#include "collectives/knomial.hpp"

namespace tether::coll {

boost::asio::awaitable<void> barrierDissemination(Context& c) {
  const int n = c.size(), r = c.rank();
  std::uint32_t step = 0;
  for (int dist = 1; dist < n; dist *= 2, ++step) {
    c.recv((r - dist + n) % n, step, nullptr, 0);
    c.send((r + dist) % n, step, nullptr, 0);
    co_await c.settle();
  }
}

}  // namespace tether::coll

namespace tether::coll {

// Tree barrier: empty frames up a k-nomial tree to rank 0 and back down:
// 2(N-1) messages instead of N*ceil(log2 N), for when CPU time is scarce.
boost::asio::awaitable<void> barrierTree(Context& c, int radix) {
  const auto node = knomialNode(c.rank(), c.size(), radix);
  for (const auto& ch : node.children) c.recv(ch.rank, 0, nullptr, 0);
  co_await c.settle();
  if (node.parent >= 0) {
    c.send(node.parent, 0, nullptr, 0);
    c.recv(node.parent, 1, nullptr, 0);  // the release comes back down the same edge
    co_await c.settle();
  }
  for (const auto& ch : node.children) c.send(ch.rank, 1, nullptr, 0);
  co_await c.settle();
}

}  // namespace tether::coll
