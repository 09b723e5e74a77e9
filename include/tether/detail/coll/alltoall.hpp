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

struct Blocks {
  const std::size_t* sendCounts = nullptr;
  const std::size_t* sendDispls = nullptr;
  const std::size_t* recvCounts = nullptr;
  const std::size_t* recvDispls = nullptr;
};

// Pairs are exchanged in the order r+i / r-i so that at each moment every rank
// talks to a different peer. `window` pairs are in flight at once: all of them
// (one round trip of latency) for small blocks, one (pairwise: bounded memory
// on the wire) for large ones.
inline void alltoallWindowed(Plan& p, const Blocks& b, int window) {
  const int n = p.size(), r = p.rank();
  p.copy(out(b.recvDispls[r]), in(b.sendDispls[r]), b.sendCounts[r]);
  window = std::max(1, window);
  for (int i = 1; i < n; i += window) {
    for (int j = i; j < std::min(n, i + window); ++j) {
      const int src = (r - j + n) % n, dst = (r + j) % n;
      p.recv(src, 0, out(b.recvDispls[src]), b.recvCounts[src]);
      p.send(dst, 0, in(b.sendDispls[dst]), b.sendCounts[dst]);
    }
    p.settle();
  }
}

}  // namespace coll
}  // namespace detail
}  // namespace tether
