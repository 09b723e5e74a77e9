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

// Records copies, merging them into few steps: one that continues the
// previous one in source and destination grows it; equal-sized ones at
// constant distances become one CopyBlocks step. Only for copies whose sources
// are not written by the same run (then merged and separate copies agree).
class CopyRun {
 public:
  explicit CopyRun(Plan& p) : p_(p) {}
  ~CopyRun() { flush(); }
  CopyRun(const CopyRun&) = delete;
  CopyRun& operator=(const CopyRun&) = delete;

  void add(Ref to, Ref from, std::size_t bytes) {
    if (bytes == 0) return;
    if (count_ && to.buffer == to_.buffer && from.buffer == from_.buffer) {
      const std::ptrdiff_t dt = distance(to_, to), df = distance(from_, from);
      if (count_ == 1 && dt == static_cast<std::ptrdiff_t>(bytes_) && df == dt) {
        bytes_ += bytes;  // contiguous in both
        return;
      }
      if (bytes == bytes_ && (count_ == 1 || (dt == static_cast<std::ptrdiff_t>(count_) * toStride_ &&
                                              df == static_cast<std::ptrdiff_t>(count_) * fromStride_))) {
        if (count_ == 1) toStride_ = dt, fromStride_ = df;
        ++count_;
        return;
      }
    }
    flush();
    to_ = to;
    from_ = from;
    bytes_ = bytes;
    count_ = 1;
  }
  void flush() {
    if (count_) p_.copyBlocks(to_, toStride_, from_, fromStride_, bytes_, count_);
    count_ = 0;
  }

 private:
  static std::ptrdiff_t distance(Ref a, Ref b) {
    return static_cast<std::ptrdiff_t>(b.offset) - static_cast<std::ptrdiff_t>(a.offset);
  }
  Plan& p_;
  Ref to_, from_;
  std::size_t bytes_ = 0, count_ = 0;
  std::ptrdiff_t toStride_ = 0, fromStride_ = 0;
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
    // The slots of round k come in runs [first, first + 2^k) with first =
    // m 2^(k+1) + 2^k, packed from block m 2^k on. A run's first slot (lowest
    // set bit k) has not moved yet: it is read from In.
    auto packedAt = [&](int first) { return packed + static_cast<std::size_t>(first / (2 * dist) * dist) * bytes; };
    auto arrivedAt = [&](int first) { return arrived + static_cast<std::size_t>(first / (2 * dist) * dist) * bytes; };
    auto runBytes = [&](int first) { return static_cast<std::size_t>(std::min(dist, n - first)) * bytes; };
    {
      CopyRun pack(p);
      for (int first = dist; first < n; first += 2 * dist)
        pack.add(packedAt(first), in(wrap(r - first) * bytes), bytes);
      pack.flush();
      for (int first = dist; first < n; first += 2 * dist)
        pack.add(packedAt(first) + bytes, slot(first + 1), runBytes(first) - bytes);
    }
    p.recv(static_cast<int>(wrap(r + dist)), static_cast<std::uint32_t>(k), arrived, blocks * bytes);
    p.send(static_cast<int>(wrap(r - dist)), static_cast<std::uint32_t>(k), packed, blocks * bytes);
    p.settle();
    // Run 0 (bit k is the highest) has arrived: slot i holds the block from r + i.
    CopyRun unpack(p);
    for (int i = dist; i < std::min(2 * dist, n); ++i)
      unpack.add(out(wrap(r + i) * bytes), arrived + static_cast<std::size_t>(i - dist) * bytes, bytes);
    unpack.flush();
    for (int first = 3 * dist; first < n; first += 2 * dist) unpack.add(slot(first), arrivedAt(first), runBytes(first));
  }
}

}  // namespace coll
}  // namespace detail
}  // namespace tether
