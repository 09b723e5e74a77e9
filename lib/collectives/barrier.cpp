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
