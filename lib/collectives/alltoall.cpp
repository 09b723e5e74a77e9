// All-to-all(v). Pairs are exchanged in the order r+i / r-i so that at each
// moment every rank talks to a different peer. `window` is how many pairs are
// in flight at once: all of them (one round trip of latency) for small
// messages, one at a time (pairwise, bounded memory on the wire) for large.
#include <algorithm>
#include <cstring>

#include "collectives/context.hpp"

namespace tether::coll {

boost::asio::awaitable<void> alltoallv(Context& c, const unsigned char* send, const std::size_t* sendCounts,
                                       const std::size_t* sendDispls, unsigned char* recv,
                                       const std::size_t* recvCounts, const std::size_t* recvDispls,
                                       int window) {
  const int n = c.size(), r = c.rank();
  if (recvCounts[r] != sendCounts[r])
    throw Error(ErrorCode::InvalidArgument,
                "alltoallv: this rank sends itself " + std::to_string(sendCounts[r]) + " bytes but expects " +
                    std::to_string(recvCounts[r]));
  if (sendCounts[r]) std::memmove(recv + recvDispls[r], send + sendDispls[r], sendCounts[r]);
  window = std::max(1, window);
  for (int i = 1; i < n; i += window) {
    for (int j = i; j < std::min(n, i + window); ++j) {
      int src = (r - j + n) % n, dst = (r + j) % n;
      c.recv(src, 0, recv + recvDispls[src], recvCounts[src]);
      c.send(dst, 0, send + sendDispls[dst], sendCounts[dst]);
    }
    co_await c.settle();
  }
}

}  // namespace tether::coll
