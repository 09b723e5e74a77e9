// Dissemination barrier: ceil(log2 N) rounds of empty frames; in round k each
// rank signals r + 2^k and waits for r - 2^k.
#include "collectives/context.hpp"

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

// Tree barrier: empty frames up a binomial tree to rank 0 and back down:
// 2(N-1) messages instead of N*ceil(log2 N), for when CPU time is scarce.
boost::asio::awaitable<void> barrierTree(Context& c) {
  const int n = c.size(), r = c.rank();
  int mask = 1;
  for (; mask < n; mask <<= 1) {
    if (r & mask) {
      c.send(r - mask, 0, nullptr, 0);
      c.recv(r - mask, 1, nullptr, 0);  // the release comes back down the same edge
      co_await c.settle();
      break;
    }
    if (r + mask < n) {
      c.recv(r + mask, 0, nullptr, 0);
      co_await c.settle();
    }
  }
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (r + mask < n) c.send(r + mask, 1, nullptr, 0);
  co_await c.settle();
}

}  // namespace tether::coll
