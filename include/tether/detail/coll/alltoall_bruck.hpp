// tether/detail/coll/alltoall_bruck.hpp — Bruck's all-to-all for small
// blocks: ceil(log2 N) rounds of one send and one receive per rank, so each
// rank talks to at most 2 ceil(log2 N) peers instead of N - 1 (no full mesh).
// Blocks are forwarded: the one from s to d travels d - s hops (mod N),
// one per set bit. Layout as in alltoall: block for rank d leaves from
// in(d * bytes), block from rank s lands at out(s * bytes); In and Out do not
// overlap (the bootstraps copy the send data of an in-place call).
// Header-only, C++17.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "tether/detail/coll/plan.hpp"

namespace tether {
namespace detail {
namespace coll {

// Records copies, merging one that continues the previous one in both
// source and destination into a single step. Only for copies whose source
// and destination do not overlap (then merged and separate copies agree).
class CopyRun {
 public:
  explicit CopyRun(Plan& p) : p_(p) {}
  ~CopyRun() { flush(); }
  CopyRun(const CopyRun&) = delete;
  CopyRun& operator=(const CopyRun&) = delete;

  void add(Ref to, Ref from, std::size_t bytes) {
    if (bytes == 0) return;
    if (bytes_ && to.buffer == to_.buffer && from.buffer == from_.buffer && to.offset == to_.offset + bytes_ &&
        from.offset == from_.offset + bytes_) {
      bytes_ += bytes;
      return;
    }
    flush();
    to_ = to;
    from_ = from;
    bytes_ = bytes;
  }
  void flush() {
    p_.copy(to_, from_, bytes_);
    bytes_ = 0;
  }

 private:
  Plan& p_;
  Ref to_, from_;
  std::size_t bytes_ = 0;
};

// How many of the slots 0 .. n-1 have bit `k` set: the blocks of round k.
inline std::size_t bruckRoundBlocks(int n, int k) {
  const std::size_t period = std::size_t{2} << k, half = std::size_t{1} << k;
  const std::size_t whole = static_cast<std::size_t>(n) / period * half;
  const std::size_t rest = static_cast<std::size_t>(n) % period;
  return whole + (rest > half ? rest - half : 0);
}

// Slot i of rank r holds the block on its way to rank r - i: at first r's own
// block for r - i (read straight from In), later one received into Scratch.
// Round k (distance 2^k) sends the slots with bit k set, packed, to r - 2^k
// and receives the same slots from r + 2^k. A slot received in the round of
// its highest set bit has arrived: slot i of rank d holds the block from
// d + i, and goes straight to Out.
inline void alltoallBruck(Plan& p, std::size_t bytes) {
  const int n = p.size(), r = p.rank();
  auto wrap = [n](long long x) { return static_cast<std::size_t>(((x % n) + n) % n); };
  p.copy(out(static_cast<std::size_t>(r) * bytes), in(static_cast<std::size_t>(r) * bytes), bytes);
  if (n == 1) return;
  std::size_t most = 0;  // blocks in the largest round
  for (int k = 0; (1LL << k) < n; ++k) most = std::max(most, bruckRoundBlocks(n, k));
  const Ref held = p.scratch(static_cast<std::size_t>(n) * bytes);  // slot i at held + i * bytes
  const Ref packed = p.scratch(most * bytes), arrived = p.scratch(most * bytes);
  auto slot = [&](int i) { return held + static_cast<std::size_t>(i) * bytes; };
  for (int k = 0; (1LL << k) < n; ++k) {
    const int dist = 1 << k;
    const std::size_t blocks = bruckRoundBlocks(n, k);
    {
      CopyRun pack(p);
      std::size_t j = 0;
      for (int i = dist; i < n; i = (i + 1) | dist, ++j) {
        // Lowest set bit k: nothing has moved this slot yet.
        const bool untouched = (i & (dist - 1)) == 0;
        pack.add(packed + j * bytes, untouched ? in(wrap(r - i) * bytes) : slot(i), bytes);
      }
    }
    p.recv(static_cast<int>(wrap(r + dist)), static_cast<std::uint32_t>(k), arrived, blocks * bytes);
    p.send(static_cast<int>(wrap(r - dist)), static_cast<std::uint32_t>(k), packed, blocks * bytes);
    p.settle();
    CopyRun unpack(p);
    std::size_t j = 0;
    for (int i = dist; i < n; i = (i + 1) | dist, ++j) {
      const bool done = i < 2 * dist;  // bit k is its highest
      unpack.add(done ? out(wrap(r + i) * bytes) : slot(i), arrived + j * bytes, bytes);
    }
  }
}

}  // namespace coll
}  // namespace detail
}  // namespace tether
