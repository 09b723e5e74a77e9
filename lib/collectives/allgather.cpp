// All-gather. Bruck: ceil(log2 N) rounds for any N, best for small blocks.
// Ring: N-1 rounds, each rank sends and receives one block per round straight
// from and into the caller's buffer; best for large blocks.
#include <cstring>
#include <vector>

#include "collectives/context.hpp"
#include "collectives/knomial.hpp"

namespace tether::coll {

boost::asio::awaitable<void> allgatherBruck(Context& c, unsigned char* data, std::size_t bytes) {
  const int n = c.size(), r = c.rank();
  // tmp block i holds rank (r + i) % n's data.
  std::vector<unsigned char> tmp(static_cast<std::size_t>(n) * bytes);
  if (bytes) std::memcpy(tmp.data(), data + static_cast<std::size_t>(r) * bytes, bytes);
  std::uint32_t step = 0;
  for (int dist = 1; dist < n; dist *= 2, ++step) {
    int blocks = std::min(dist, n - dist);
    c.recv((r + dist) % n, step, tmp.data() + static_cast<std::size_t>(dist) * bytes,
           static_cast<std::size_t>(blocks) * bytes);
    c.send((r - dist + n) % n, step, tmp.data(), static_cast<std::size_t>(blocks) * bytes);
    co_await c.settle();
  }
  for (int i = 1; i < n && bytes; ++i)
    std::memcpy(data + static_cast<std::size_t>((r + i) % n) * bytes, tmp.data() + static_cast<std::size_t>(i) * bytes,
                bytes);
}

boost::asio::awaitable<void> allgatherRing(Context& c, unsigned char* data, std::size_t bytes) {
  const int n = c.size(), r = c.rank();
  const int right = (r + 1) % n, left = (r - 1 + n) % n;
  for (int step = 0; step < n - 1; ++step) {
    int sendBlock = (r - step + n) % n;
    int recvBlock = (r - step - 1 + n) % n;
    c.recv(left, static_cast<std::uint32_t>(step), data + static_cast<std::size_t>(recvBlock) * bytes, bytes);
    c.send(right, static_cast<std::uint32_t>(step), data + static_cast<std::size_t>(sendBlock) * bytes, bytes);
    co_await c.settle();
  }
}

}  // namespace tether::coll

namespace tether::coll {

// Linear: one round; every rank sends its block to every other rank at once.
// N-1 messages per rank, but only one message latency on the critical path.
boost::asio::awaitable<void> allgatherLinear(Context& c, unsigned char* data, std::size_t bytes) {
  const int n = c.size(), r = c.rank();
  for (int i = 1; i < n; ++i) {
    int src = (r - i + n) % n, dst = (r + i) % n;
    c.recv(src, 0, data + static_cast<std::size_t>(src) * bytes, bytes);
    c.send(dst, 0, data + static_cast<std::size_t>(r) * bytes, bytes);
  }
  co_await c.settle();
}

}  // namespace tether::coll

namespace tether::coll {

// Tree: gather up a k-nomial tree to rank 0, then broadcast the whole buffer
// back down: 2(N-1) messages in all instead of Bruck's N*ceil(log2 N). Each
// rank posts the receives from all its children at once and sends up when
// they are in, so a rank wakes about once per phase. Wins when ranks
// outnumber cores and CPU time (system calls, wake-ups), not wire latency,
// is the bottleneck; a large radix makes the tree flat (fewest hops).
boost::asio::awaitable<void> allgatherTree(Context& c, unsigned char* data, std::size_t bytes, int radix) {
  const int n = c.size(), r = c.rank();
  const auto node = knomialNode(r, n, radix);
  auto block = [&](int first) { return data + static_cast<std::size_t>(first) * bytes; };
  for (const auto& ch : node.children) c.recv(ch.rank, 0, block(ch.rank), static_cast<std::size_t>(ch.span) * bytes);
  co_await c.settle();
  const std::size_t all = static_cast<std::size_t>(n) * bytes;
  if (node.parent >= 0) {
    c.send(node.parent, 0, block(r), static_cast<std::size_t>(node.span) * bytes);
    c.recv(node.parent, 1, data, all);  // step 1: the broadcast (a distinct key)
    co_await c.settle();
  }
  for (const auto& ch : node.children) c.send(ch.rank, 1, data, all);
  co_await c.settle();
}

}  // namespace tether::coll
