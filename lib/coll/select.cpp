#include "coll/select.hpp"

#include <algorithm>
#include <array>
#include <string>

#include "base/env.hpp"
#include "tether/error.hpp"

namespace tether::coll {
namespace {

struct Settings {
  // Forced row name per family, indexed by the family's Op value ("" = automatic).
  std::array<std::string, 8> forced;
  dc::Shape tuning;
};

std::string forcedName(const char* var, dc::Op family) {
  auto v = env::get(var);
  if (!v || *v == "auto") return "";
  if (dc::findAlgorithm(family, v->c_str())) return *v;
  std::string allowed = "auto";
  for (const auto& a : dc::kAlgorithms)
    if (a.family == family) allowed += std::string("|") + a.name;
  throw Error(ErrorCode::InvalidArgument, std::string(var) + "='" + *v + "' (use " + allowed + ")");
}

Settings load() {
  Settings s;
  auto set = [&](const char* var, dc::Op family) { s.forced[static_cast<std::size_t>(family)] = forcedName(var, family); };
  set("TETHER_ALGO_ALLGATHER", dc::Op::Allgather);
  set("TETHER_ALGO_ALLTOALL", dc::Op::Alltoall);
  set("TETHER_ALGO_BROADCAST", dc::Op::Broadcast);
  set("TETHER_ALGO_BARRIER", dc::Op::Barrier);
  s.tuning.largeBytes = static_cast<std::size_t>(env::getInt("TETHER_ALGO_LARGE_BYTES", 64 * 1024));
  s.tuning.chunk = static_cast<std::size_t>(
      std::max<std::int64_t>(4096, env::getInt("TETHER_PIPELINE_CHUNK_BYTES", 256 * 1024)));
  // Flat (every rank talks to rank 0) up to 64 ranks by default: on 2 cores,
  // 64 B all-gather, flat beat radix 2, 4 and 8 at N = 8, 16 and 32
  // (docs/benchmarks.md). Past 64 ranks the tree gets a second level, so
  // rank 0 does not serialise thousands of messages.
  auto radix = env::getInt("TETHER_TREE_RADIX", 0);
  if (radix != 0 && radix < 2)
    throw Error(ErrorCode::InvalidArgument,
                "TETHER_TREE_RADIX=" + std::to_string(radix) + " (use 0 for the default, or 2 or more)");
  if (radix) s.tuning.radix = static_cast<int>(std::min<std::int64_t>(radix, 1 << 20));
  return s;
}

const Settings& settings() {
  static const Settings s = load();
  return s;
}

}  // namespace

void checkSettings() { settings(); }

dc::Shape shape(int rank, int size, bool cpuBound) {
  dc::Shape s = settings().tuning;
  s.rank = rank;
  s.size = size;
  s.cpuBound = cpuBound;
  return s;
}

const dc::Algorithm& choose(const dc::Shape& shape, const dc::Call& call) {
  const auto& forced = settings().forced[static_cast<std::size_t>(dc::familyOf(call.op))];
  return *dc::choose(shape, call, forced.c_str());
}

}  // namespace tether::coll
