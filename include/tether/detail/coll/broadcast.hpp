// tether/detail/coll/broadcast.hpp — broadcast algorithms, in place on Out.
// Header-only, C++17.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "tether/detail/coll/plan.hpp"

namespace tether {
namespace detail {
namespace coll {

// Binomial tree: ceil(log2 N) rounds, for small payloads.
inline void broadcastBinomial(Plan& p, std::size_t bytes, int root) {
  const int n = p.size();
  const int vr = (p.rank() - root + n) % n;  // rank relative to the root
  auto real = [&](int v) { return (v + root) % n; };
  int mask = 1;
  while (mask < n) {
    if (vr & mask) {
      p.recv(real(vr - mask), 0, out(), bytes);
      p.settle();
      break;
    }
    mask <<= 1;
  }
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (vr + mask < n) p.send(real(vr + mask), 0, out(), bytes);
}

// Pipeline: a chain root -> root+1 -> ... cut into chunks, so every link
// carries the payload once and chunks flow concurrently; for large payloads.
inline void broadcastPipeline(Plan& p, std::size_t bytes, int root, std::size_t chunk) {
  const int n = p.size();
  const int vr = (p.rank() - root + n) % n;
  const bool hasPrev = vr > 0, hasNext = vr + 1 < n;
  const int prev = (p.rank() - 1 + n) % n, next = (p.rank() + 1) % n;
  chunk = std::max<std::size_t>(chunk, 1);
  const std::size_t chunks = std::max<std::size_t>(1, (bytes + chunk - 1) / chunk);
  auto len = [&](std::size_t i) { return std::min(chunk, bytes - std::min(bytes, i * chunk)); };
  if (hasPrev) p.recv(prev, 0, out(0), len(0));
  for (std::size_t i = 0; i < chunks; ++i) {
    p.settle();  // chunk i is here, chunk i-1 has left
    if (hasNext) p.send(next, static_cast<std::uint32_t>(i), out(i * chunk), len(i));
    if (hasPrev && i + 1 < chunks) p.recv(prev, static_cast<std::uint32_t>(i + 1), out((i + 1) * chunk), len(i + 1));
  }
}

}  // namespace coll
}  // namespace detail
}  // namespace tether
