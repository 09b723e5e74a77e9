// tether/detail/coll/alltoall.hpp — all-to-all(v) algorithms. Counts and
// displacements in bytes; block for rank j leaves from in(sendDispls[j]),
// block from rank j lands at out(recvDispls[j]). Header-only, C++17.
#pragma once

#include <algorithm>
#include <cstddef>

#include "tether/detail/coll/plan.hpp"

namespace tether {
namespace detail {
namespace coll {

// An all-to-all(v)'s arrays. All null for the uniform all-to-all: every block
// is `bytes` long and block j sits at j * bytes (no arrays to build per call,
// and the plan depends on `bytes` only, so it is cached).
struct Blocks {
  const std::size_t* sendCounts = nullptr;
  const std::size_t* sendDispls = nullptr;
  const std::size_t* recvCounts = nullptr;
  const std::size_t* recvDispls = nullptr;
};

// Entry j of `array`, or of the uniform layout of `bytes` blocks when it is null.
inline std::size_t countOf(const std::size_t* counts, std::size_t bytes, int j) { return counts ? counts[j] : bytes; }
inline std::size_t displOf(const std::size_t* displs, std::size_t bytes, int j) {
  return displs ? displs[j] : static_cast<std::size_t>(j) * bytes;
}

// Pairs are exchanged in the order r+i / r-i so that at each moment every rank
// talks to a different peer. `window` pairs are in flight at once: all of them
// (one round trip of latency) for small blocks, one (pairwise: bounded memory
// on the wire) for large ones. `bytes`: the block size when `b` is uniform.
inline void alltoallWindowed(Plan& p, const Blocks& b, std::size_t bytes, int window) {
  const int n = p.size(), r = p.rank();
  p.copy(out(displOf(b.recvDispls, bytes, r)), in(displOf(b.sendDispls, bytes, r)), countOf(b.sendCounts, bytes, r));
  window = std::max(1, window);
  for (int i = 1; i < n; i += window) {
    for (int j = i; j < std::min(n, i + window); ++j) {
      const int src = (r - j + n) % n, dst = (r + j) % n;
      p.recv(src, 0, out(displOf(b.recvDispls, bytes, src)), countOf(b.recvCounts, bytes, src));
      p.send(dst, 0, in(displOf(b.sendDispls, bytes, dst)), countOf(b.sendCounts, bytes, dst));
    }
    p.settle();
  }
}

}  // namespace coll
}  // namespace detail
}  // namespace tether
