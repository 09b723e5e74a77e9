// Records each simulated rank's plan with the real algorithm table
// (tether/detail/coll/table.hpp: choose() and record(), the settings from
// TETHER_ALGO, as every world does), in size-only form: the
// plan's buffer references are offsets and nothing is allocated for
// payloads. A recorded plan is compacted to what the simulator needs (sends,
// receives, settles, and the bytes of local copies) and then freed.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tether/detail/coll/settings.hpp"

namespace tether::sim {

namespace dc = tether::detail::coll;

enum class Mode { Auto, Full, Periodic };

struct CollectiveSpec {
  dc::Op op = dc::Op::Allgather;
  std::size_t bytes = 64;  // per rank (alltoallv: the mean block; blocks are bytes/2 .. 2*bytes)
  int root = 0;            // broadcast
  std::string forced;      // a table row; "" = TETHER_ALGO or the automatic choice
  int treeRadix = 0;       // the tree rows' radix; 0 = TETHER_ALGO or dc::treeRadix's choice
  int calls = 1;           // back to back, each rank starting its next when its last returned
  Mode mode = Mode::Auto;
  // Auto runs every rank while the estimated work (plan steps recorded plus
  // messages) stays under this; above it, periodic if the plans allow.
  double budget = 4e8;
  std::uint64_t seed = 1;  // all-to-all-v block sizes
  // Tests: record this instead of the table's algorithm, and see when each
  // rank returns from its last call (picoseconds since the operation began).
  std::function<void(dc::Plan&)> build;
  std::string buildName = "custom";
  std::function<void(int rank, std::int64_t finishedPs)> onFinish;
};

struct CStep {
  enum Kind : std::uint8_t { Send, Recv, Settle, Local };
  std::uint64_t bytes = 0;
  std::int32_t peer = -1;
  std::uint32_t step = 0;
  Kind kind = Settle;
};

struct CompactPlan {
  std::vector<CStep> steps;
  std::size_t recorded = 0;  // steps of the plan as recorded (copies included)
  std::size_t sends = 0;
  // Blocks its copy steps move (a CopyBlocks step counts `count`): what
  // recording it cost, since the algorithms add copies block by block and
  // merge them into strided steps (Bruck's packs: O(N log N) per rank).
  std::size_t copiedBlocks = 0;
};

class Planner {
 public:
  Planner(const CollectiveSpec& spec, int nranks, bool cpuBound);
  CompactPlan plan(int rank) const;
  // The row rank 0 runs ("custom" for a test's recording).
  std::string algorithm() const;
  // Rank i + kR's plan is rank i's with every peer shifted by kR, for
  // i < R and a sample of k (the first, second, middle, last host and a
  // few drawn with the seed). Periodic mode needs it.
  bool shiftSymmetric(int ranksPerHost) const;
  // Estimated plan steps, blocks copied (the cost of recording) and
  // messages over all ranks, from a sample.
  double estimatedWork(int ranksPerHost) const;

 private:
  dc::Shape shapeOf(int rank) const;
  dc::Call callOf(int rank, std::vector<std::size_t>& storage) const;
  std::size_t blockBytes(int from, int to) const;  // alltoallv

  CollectiveSpec spec_;
  int n_;
  bool cpuBound_;
  dc::Settings settings_;
  std::vector<std::size_t> uniform_;  // alltoall: counts and displacements, the same on every rank
};

}  // namespace tether::sim
