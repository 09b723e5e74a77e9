// Which algorithm a collective uses: by size, overridable by environment
// (docs/configuration.md). Read once per process.
#pragma once

#include <cstddef>

namespace tether::coll {

enum class AllgatherAlgo { Bruck, Ring };
enum class BroadcastAlgo { Binomial, Pipeline };

struct Selection {
  AllgatherAlgo allgather(std::size_t bytesPerRank, int nranks) const;
  BroadcastAlgo broadcast(std::size_t bytes, int nranks) const;
  // Pairs of an all-to-all in flight at once.
  int alltoallWindow(std::size_t maxPairBytes, int nranks) const;
  std::size_t pipelineChunk() const { return chunk; }

  int forceAllgather = -1;  // -1 auto, else AllgatherAlgo
  int forceBroadcast = -1;
  int forceAlltoallWindow = 0;  // 0 auto
  std::size_t largeBytes = 64 * 1024;
  std::size_t chunk = 256 * 1024;
};

const Selection& selection();

}  // namespace tether::coll
