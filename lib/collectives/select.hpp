// Which algorithm a collective uses: by size, overridable by environment
// (docs/configuration.md). Read once per process.
#pragma once

#include <cstddef>

namespace tether::coll {

enum class AllgatherAlgo { Bruck, Ring, Linear, Tree };
enum class BroadcastAlgo { Binomial, Pipeline };
enum class BarrierAlgo { Dissemination, Tree };

struct Selection {
  // `cpuBound`: more ranks of this world on this host than cores. Then total
  // system calls and wake-ups, not rounds, decide latency, and the tree
  // variants (2(N-1) messages) beat the log-round ones (N*log2 N messages).
  AllgatherAlgo allgather(std::size_t bytesPerRank, int nranks, bool cpuBound) const;
  BarrierAlgo barrier(bool cpuBound) const;
  BroadcastAlgo broadcast(std::size_t bytes, int nranks) const;
  // Pairs of an all-to-all in flight at once.
  int alltoallWindow(std::size_t maxPairBytes, int nranks) const;
  std::size_t pipelineChunk() const { return chunk; }

  int forceAllgather = -1;  // -1 auto, else AllgatherAlgo
  int forceBroadcast = -1;
  int forceBarrier = -1;
  int forceAlltoallWindow = 0;  // 0 auto
  std::size_t largeBytes = 64 * 1024;
  std::size_t chunk = 256 * 1024;
  int treeRadix = 64;  // of the tree all-gather and tree barrier (TETHER_TREE_RADIX)
};

const Selection& selection();

}  // namespace tether::coll
