// Broadcast. Binomial tree: ceil(log2 N) rounds, for small payloads.
// Pipeline: a chain root -> root+1 -> ... cut into chunks, so every link
// carries the payload once and chunks flow concurrently; for large payloads.
#include <algorithm>

#include "collectives/context.hpp"

namespace tether::coll {

boost::asio::awaitable<void> broadcastBinomial(Context& c, unsigned char* data, std::size_t bytes, int root) {
  const int n = c.size();
  const int vr = (c.rank() - root + n) % n;  // rank relative to the root
  auto real = [&](int v) { return (v + root) % n; };
  int mask = 1;
  while (mask < n) {
    if (vr & mask) {
      c.recv(real(vr - mask), 0, data, bytes);
      co_await c.settle();
      break;
    }
    mask <<= 1;
  }
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (vr + mask < n) c.send(real(vr + mask), 0, data, bytes);
  co_await c.settle();
}

boost::asio::awaitable<void> broadcastPipeline(Context& c, unsigned char* data, std::size_t bytes, int root,
                                               std::size_t chunk) {
  const int n = c.size();
  const int vr = (c.rank() - root + n) % n;
  const bool hasPrev = vr > 0, hasNext = vr + 1 < n;
  const int prev = (c.rank() - 1 + n) % n, next = (c.rank() + 1) % n;
  const std::size_t chunks = std::max<std::size_t>(1, (bytes + chunk - 1) / chunk);
  auto at = [&](std::size_t i) { return data + i * chunk; };
  auto len = [&](std::size_t i) { return std::min(chunk, bytes - std::min(bytes, i * chunk)); };
  if (hasPrev) c.recv(prev, 0, at(0), len(0));
  for (std::size_t i = 0; i < chunks; ++i) {
    co_await c.settle();  // chunk i is here, chunk i-1 has left
    if (hasNext) c.send(next, static_cast<std::uint32_t>(i), at(i), len(i));
    if (hasPrev && i + 1 < chunks) c.recv(prev, static_cast<std::uint32_t>(i + 1), at(i + 1), len(i + 1));
  }
  co_await c.settle();
}

}  // namespace tether::coll
