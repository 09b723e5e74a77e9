#include "collectives/select.hpp"

#include <algorithm>
#include <string>

#include "base/env.hpp"
#include "tether/error.hpp"

namespace tether::coll {
namespace {

int choice(const char* var, std::initializer_list<const char*> names) {
  auto v = env::get(var);
  if (!v || *v == "auto") return -1;
  int i = 0;
  for (const char* n : names) {
    if (*v == n) return i;
    ++i;
  }
  std::string allowed = "auto";
  for (const char* n : names) allowed += std::string("|") + n;
  throw Error(ErrorCode::InvalidArgument, std::string(var) + "='" + *v + "' (use " + allowed + ")");
}

Selection load() {
  Selection s;
  s.forceAllgather = choice("TETHER_ALGO_ALLGATHER", {"bruck", "ring", "linear", "tree"});
  s.forceBroadcast = choice("TETHER_ALGO_BROADCAST", {"binomial", "pipeline"});
  s.forceBarrier = choice("TETHER_ALGO_BARRIER", {"dissemination", "tree"});
  int a2a = choice("TETHER_ALGO_ALLTOALL", {"linear", "pairwise"});
  s.forceAlltoallWindow = a2a == 0 ? 1 << 30 : a2a == 1 ? 1 : 0;
  s.largeBytes = static_cast<std::size_t>(env::getInt("TETHER_ALGO_LARGE_BYTES", 64 * 1024));
  s.chunk = static_cast<std::size_t>(std::max<std::int64_t>(4096, env::getInt("TETHER_PIPELINE_CHUNK_BYTES", 256 * 1024)));
  // Flat (every rank talks to rank 0) up to 64 ranks by default: on 2 cores,
  // 64 B all-gather, flat beat radix 2, 4 and 8 at N = 8, 16 and 32
  // (docs/benchmarks.md). Past 64 ranks the tree gets a second level, so
  // rank 0 does not serialise thousands of messages.
  auto radix = env::getInt("TETHER_TREE_RADIX", 0);
  if (radix != 0 && radix < 2)
    throw Error(ErrorCode::InvalidArgument,
                "TETHER_TREE_RADIX=" + std::to_string(radix) + " (use 0 for the default, or 2 or more)");
  if (radix) s.treeRadix = static_cast<int>(std::min<std::int64_t>(radix, 1 << 20));
  return s;
}

}  // namespace

AllgatherAlgo Selection::allgather(std::size_t bytesPerRank, int, bool cpuBound) const {
  if (forceAllgather >= 0) return static_cast<AllgatherAlgo>(forceAllgather);
  if (bytesPerRank >= largeBytes) return AllgatherAlgo::Ring;
  return cpuBound ? AllgatherAlgo::Tree : AllgatherAlgo::Bruck;
}

BarrierAlgo Selection::barrier(bool cpuBound) const {
  if (forceBarrier >= 0) return static_cast<BarrierAlgo>(forceBarrier);
  return cpuBound ? BarrierAlgo::Tree : BarrierAlgo::Dissemination;
}

BroadcastAlgo Selection::broadcast(std::size_t bytes, int nranks) const {
  if (forceBroadcast >= 0) return static_cast<BroadcastAlgo>(forceBroadcast);
  return bytes >= 4 * largeBytes && nranks > 2 ? BroadcastAlgo::Pipeline : BroadcastAlgo::Binomial;
}

int Selection::alltoallWindow(std::size_t maxPairBytes, int nranks) const {
  if (forceAlltoallWindow) return forceAlltoallWindow;
  return maxPairBytes >= largeBytes ? 1 : nranks;
}

const Selection& selection() {
  static const Selection s = load();
  return s;
}

}  // namespace tether::coll
