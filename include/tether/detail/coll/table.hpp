// tether/detail/coll/table.hpp — the algorithm table: one row per algorithm
// (the operation it implements, its name, when it is the automatic choice,
// and the function that records it into a Plan). A new algorithm is one
// header and one row. Every world chooses through choose(), so the same
// call picks the same algorithm everywhere. Header-only, C++17.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "tether/detail/coll/allgather.hpp"
#include "tether/detail/coll/alltoall.hpp"
#include "tether/detail/coll/alltoall_bruck.hpp"
#include "tether/detail/coll/alltoall_leaders.hpp"
#include "tether/detail/coll/alltoall_tree.hpp"
#include "tether/detail/coll/barrier.hpp"
#include "tether/detail/coll/broadcast.hpp"
#include "tether/detail/wire/op.hpp"
#include "tether/detail/coll/plan.hpp"

namespace tether {
namespace detail {
namespace coll {

// What every rank of the communicator agrees on, and the tuning settings.
struct Shape {
  int rank = 0;
  int size = 1;
  // A host runs more ranks than it has cores: total system calls and wake-ups,
  // not rounds, then decide latency, and the tree variants win.
  bool cpuBound = false;
  int radix = 0;                       // of the tree rows (TETHER_ALGO=tree_radix); 0: treeRadix's choice
  std::size_t largeBytes = 64 * 1024;  // a block at least this large is "large"
  std::size_t chunk = 256 * 1024;      // pipeline broadcast chunk
};

// One call's arguments, as the algorithms need them.
struct Call {
  Op op = Op::Barrier;
  // allgather/alltoall: bytes per rank; broadcast: all bytes; alltoallv: the
  // largest block this rank sends or receives.
  std::size_t bytes = 0;
  int root = 0;   // broadcast
  Blocks blocks;  // alltoall(v)
};

struct Algorithm {
  Op family;                                     // Allgather, Alltoall (also alltoallv), Broadcast or Barrier
  const char* name;                              // as TETHER_ALGO names it (allgather=ring)
  bool (*preferred)(const Shape&, const Call&);  // the automatic choice: first preferred row
  void (*build)(Plan&, const Shape&, const Call&);
};

// The family whose algorithms implement `op`.
inline Op familyOf(Op op) {
  switch (op) {
    case Op::Split:
      return Op::Allgather;
    case Op::Alltoallv:
      return Op::Alltoall;
    case Op::SubsetBarrier:
      return Op::Barrier;
    default:
      return op;
  }
}

// The tree all-to-all passes all N^2 blocks through rank 0. When ranks
// outnumber cores it beats Bruck up to this many bytes of them and loses past
// it (the measurements: docs/benchmarks.md).
constexpr std::uint64_t kAlltoallTreeMaxBytes = 16u << 20;

// Whether N^2 blocks of `bytes` fit the tree all-to-all's budget at rank 0.
inline bool alltoallTreeFits(int size, std::size_t bytes) {
  const std::uint64_t blocks = static_cast<std::uint64_t>(size) * static_cast<std::uint64_t>(size);
  return bytes <= kAlltoallTreeMaxBytes / blocks;
}

// The leaders all-to-all's leader holds 3 G N blocks: up to 4 MiB of them.
// At 1,024 ranks of 64 B (6 MiB) its peak RSS was 30 MB against Bruck's
// 15 MB and the 16 MB per rank target (docs/benchmarks.md), so it runs there
// only when forced.
constexpr std::uint64_t kAlltoallLeadersMaxBytes = 4u << 20;

inline bool alltoallLeadersFits(int size, std::size_t bytes) {
  return bytes <= kAlltoallLeadersMaxBytes / alltoallLeadersBlocks(size);
}

// The cost model for a host with more ranks than cores (docs/scale.md,
// collectives): every round costs every rank a wake-up, and the ranks share
// the cores, so a row costs rounds x N x wake + messages x (send + receive) +
// bytes moved x per byte, summed over all ranks (over C cores, which every row
// shares). The constants are this 2-core host's, fitted by tether-sim
// --measured --fit (send + receive 108 us, wake-up 27.6 us) and the per-byte
// cost that tether-bench's 64 B all-gather shows over the barrier (~1 ns/B).
struct CpuCosts {
  double wakeUs = 27.6, messageUs = 108, byteUs = 0.001;
};

struct Counts {
  double rounds, messages, bytes;  // all ranks together
};

inline double cpuBoundUs(const Shape& s, const Counts& c, const CpuCosts& k = CpuCosts{}) {
  return c.rounds * s.size * k.wakeUs + c.messages * k.messageUs + c.bytes * k.byteUs;
}

// Height of the k-nomial tree rooted at rank 0: the most non-zero digits of a rank < N.
inline int knomialHeight(int size, int radix) {
  int height = 0;
  radix = radix < 2 ? 2 : radix;
  for (long long level = 1; level < size; level *= radix) ++height;
  return height;
}

// Links the root of the k-nomial tree of `radix` over `size` ranks holds: its children.
inline int knomialRootLinks(int size, int radix) {
  radix = radix < 2 ? 2 : radix;
  int links = 0;
  for (long long level = 1; level < size; level *= radix)
    links += static_cast<int>(std::min<long long>(radix - 1, (size - 1) / level));
  return links;
}

// The widest tree radix: up to this many ranks the tree is flat.
constexpr int kTreeRadix = 64;

// The tree rows' radix: the one given (TETHER_ALGO=tree_radix); else up to
// kTreeRadix ranks the flat tree (N - 1 links at the root, within the default
// link budget of 64; flat beat radix 2-8 at N = 8-32, docs/design.md), and
// past it the largest radix up to kTreeRadix whose root holds at most
// kLeaderLinks links, the bound the leaders row keeps. Radix 64 gave rank 0
// 78 children at 1,024 ranks: over the budget, it closed and dialled again
// some of them in every call (325-407 budget closes over six all-gathers, the
// slowest call 8.5 s; with radix 24, the one chosen there, in the same
// sitting: none, 3.4-5.4 s; docs/benchmarks.md).
inline int treeRadix(int size, int given = 0) {
  if (given > 0) return given;
  if (size <= kTreeRadix) return kTreeRadix;
  int radix = kTreeRadix;
  while (radix > 2 && knomialRootLinks(size, radix) > kLeaderLinks) --radix;
  return radix;
}
inline int treeRadix(const Shape& s) { return treeRadix(s.size, s.radix); }

// The counts of the tree and leaders rows (test/unit: allgather-plans,
// alltoall-plans check them against the plans).
inline Counts treeCounts(const Shape& s, const Call& c) {
  const double n = s.size, b = static_cast<double>(c.bytes), h = knomialHeight(s.size, treeRadix(s));
  // all-gather: every rank receives the whole buffer; all-to-all: every block
  // goes up and down the tree.
  const double bytes = c.op == Op::Alltoall ? 2 * h * n * n * b : n * n * b;
  return Counts{2 * h, 2 * (n - 1), bytes};
}

inline Counts leadersCounts(const Shape& s, const Call& c) {
  const int g = leadersGroup(s.size);
  const double n = s.size, m = (s.size + g - 1) / g, b = static_cast<double>(c.bytes);
  const double bytes = c.op == Op::Alltoall ? 3 * n * n * b : n * n * b;
  return Counts{3, 2 * (n - m) + m * (m - 1), bytes};
}

// When ranks outnumber cores: the leaders row where the model puts it under
// the tree (from 65 ranks at small blocks: the tree gets a second level).
inline bool leadersBeatTree(const Shape& s, const Call& c) {
  return s.size > 2 && cpuBoundUs(s, leadersCounts(s, c)) < cpuBoundUs(s, treeCounts(s, c));
}

inline bool never(const Shape&, const Call&) { return false; }
inline bool always(const Shape&, const Call&) { return true; }

// Rows in order of preference within each family; the last row of a family
// is always preferred, so choose() always finds one.
inline const Algorithm kAlgorithms[] = {
    {Op::Allgather, "ring", [](const Shape& s, const Call& c) { return c.bytes >= s.largeBytes; },
     [](Plan& p, const Shape&, const Call& c) { allgatherRing(p, c.bytes); }},
    {Op::Allgather, "tree", [](const Shape& s, const Call& c) { return s.cpuBound && !leadersBeatTree(s, c); },
     [](Plan& p, const Shape& s, const Call& c) { allgatherTree(p, c.bytes, treeRadix(s)); }},
    {Op::Allgather, "leaders", [](const Shape& s, const Call&) { return s.cpuBound; },
     [](Plan& p, const Shape&, const Call& c) { allgatherLeaders(p, c.bytes); }},
    {Op::Allgather, "linear", never, [](Plan& p, const Shape&, const Call& c) { allgatherLinear(p, c.bytes); }},
    {Op::Allgather, "bruck", always, [](Plan& p, const Shape&, const Call& c) { allgatherBruck(p, c.bytes); }},

    // alltoallv runs pairwise or linear only: the forwarding rows would need
    // the sizes of the blocks they forward (docs/design.md), so bruck and tree
    // run linear for it even when forced. Its `bytes` is the local largest
    // block, which ranks may disagree on: safe because pairwise and linear
    // post the same frames.
    {Op::Alltoall, "pairwise", [](const Shape& s, const Call& c) { return c.bytes >= s.largeBytes; },
     [](Plan& p, const Shape&, const Call& c) { alltoallWindowed(p, c.blocks, c.bytes, 1); }},
    {Op::Alltoall, "tree",
     [](const Shape& s, const Call& c) {
       return c.op == Op::Alltoall && s.cpuBound && alltoallTreeFits(s.size, c.bytes) &&
              (!alltoallLeadersFits(s.size, c.bytes) || !leadersBeatTree(s, c));
     },
     [](Plan& p, const Shape& s, const Call& c) {
       if (c.op == Op::Alltoall)
         alltoallTree(p, c.bytes, treeRadix(s));
       else
         alltoallWindowed(p, c.blocks, c.bytes, p.size());
     }},
    {Op::Alltoall, "leaders",
     [](const Shape& s, const Call& c) {
       return c.op == Op::Alltoall && s.cpuBound && alltoallLeadersFits(s.size, c.bytes);
     },
     [](Plan& p, const Shape&, const Call& c) {
       if (c.op == Op::Alltoall)
         alltoallLeaders(p, c.bytes);
       else
         alltoallWindowed(p, c.blocks, c.bytes, p.size());
     }},
    {Op::Alltoall, "bruck", [](const Shape&, const Call& c) { return c.op == Op::Alltoall; },
     [](Plan& p, const Shape&, const Call& c) {
       if (c.op == Op::Alltoall)
         alltoallBruck(p, c.bytes);
       else
         alltoallWindowed(p, c.blocks, c.bytes, p.size());
     }},
    {Op::Alltoall, "linear", always,
     [](Plan& p, const Shape&, const Call& c) { alltoallWindowed(p, c.blocks, c.bytes, p.size()); }},

    {Op::Broadcast, "pipeline", [](const Shape& s, const Call& c) { return c.bytes >= 4 * s.largeBytes && s.size > 2; },
     [](Plan& p, const Shape& s, const Call& c) { broadcastPipeline(p, c.bytes, c.root, s.chunk); }},
    {Op::Broadcast, "binomial", always,
     [](Plan& p, const Shape&, const Call& c) { broadcastBinomial(p, c.bytes, c.root); }},

    {Op::Barrier, "tree", [](const Shape& s, const Call&) { return s.cpuBound; },
     [](Plan& p, const Shape& s, const Call&) { barrierTree(p, treeRadix(s)); }},
    {Op::Barrier, "dissemination", always, [](Plan& p, const Shape&, const Call&) { barrierDissemination(p); }},
};

// The row of `family` called `name`, or nullptr.
inline const Algorithm* findAlgorithm(Op family, const char* name) {
  for (const Algorithm& a : kAlgorithms)
    if (a.family == family && std::strcmp(a.name, name) == 0) return &a;
  return nullptr;
}

// `forced` (a row name, or nullptr/"" for automatic) or the first preferred row.
inline const Algorithm* choose(const Shape& s, const Call& c, const char* forced = nullptr) {
  const Op family = familyOf(c.op);
  if (forced && *forced) {
    if (const Algorithm* a = findAlgorithm(family, forced)) return a;
  }
  for (const Algorithm& a : kAlgorithms)
    if (a.family == family && a.preferred(s, c)) return &a;
  return nullptr;
}

// Records `algo` for this rank.
inline Plan record(const Algorithm& algo, const Shape& s, const Call& c) {
  Plan p(s.rank, s.size);
  algo.build(p, s, c);
  return p;
}

}  // namespace coll
}  // namespace detail
}  // namespace tether
