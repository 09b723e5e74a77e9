// tether/detail/coll/settings.hpp — the algorithm settings from the
// environment (docs/configuration.md): TETHER_ALGO_{ALLGATHER,ALLTOALL,
// BROADCAST,BARRIER} name a row of the table (or "auto"), TETHER_ALGO_TREE_RADIX
// (formerly TETHER_TREE_RADIX),
// TETHER_ALGO_LARGE_BYTES and TETHER_PIPELINE_CHUNK_BYTES tune them. Read the
// same way by every world, so the same environment picks the same algorithm.
// Header-only, C++17.
#pragma once

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "tether/detail/coll/table.hpp"
#include "tether/detail/env_int.hpp"
#include "tether/error.hpp"

namespace tether {
namespace detail {
namespace coll {

struct Settings {
  std::array<std::string, 8> forced;  // a row name per family (indexed by Op), "" = automatic
  Shape tuning;                       // radix, largeBytes, chunk

  const char* forcedFor(Op op) const { return forced[static_cast<std::size_t>(familyOf(op))].c_str(); }
};

// The ranges of the tuning variables (the library's table of variables,
// lib/base/settings.cpp, uses the same).
constexpr std::int64_t kMaxLargeBytes = std::int64_t{1} << 40;
constexpr std::int64_t kMinChunk = 4096, kMaxChunk = std::int64_t{1} << 30;
constexpr std::int64_t kMaxTreeRadix = 1 << 20;
// The radix of the tree algorithms (not the rendezvous' tree), and its old name.
constexpr const char* kTreeRadix = "TETHER_ALGO_TREE_RADIX";
constexpr const char* kFormerTreeRadix = "TETHER_TREE_RADIX";

inline std::string envAlgorithm(const char* var, Op family) {
  const char* v = envValue(var).text;
  if (!v || !*v || std::string(v) == "auto") return "";
  if (findAlgorithm(family, v)) return v;
  std::string allowed = "auto";
  for (const auto& a : kAlgorithms)
    if (a.family == family) allowed += std::string("|") + a.name;
  throw Error(ErrorCode::InvalidArgument, std::string(var) + "='" + v + "' (use " + allowed + ")");
}

// Throws Error{InvalidArgument} naming the variable for a bad value.
inline Settings loadSettings() {
  Settings s;
  auto set = [&](const char* var, Op family) {
    s.forced[static_cast<std::size_t>(family)] = envAlgorithm(var, family);
  };
  set("TETHER_ALGO_ALLGATHER", Op::Allgather);
  set("TETHER_ALGO_ALLTOALL", Op::Alltoall);
  set("TETHER_ALGO_BROADCAST", Op::Broadcast);
  set("TETHER_ALGO_BARRIER", Op::Barrier);
  s.tuning.largeBytes = static_cast<std::size_t>(envInt("TETHER_ALGO_LARGE_BYTES", 64 * 1024, 0, kMaxLargeBytes));
  s.tuning.chunk = static_cast<std::size_t>(envInt("TETHER_PIPELINE_CHUNK_BYTES", 256 * 1024, kMinChunk, kMaxChunk));
  // Flat (every rank talks to rank 0) up to 64 ranks by default (the
  // measurements: docs/benchmarks.md). Past 64 ranks the tree gets a second
  // level, so rank 0 does not serialise thousands of messages.
  const EnvValue given = envValue(kTreeRadix, kFormerTreeRadix);
  const std::int64_t radix = given ? parseEnvInt(given.name, given.text, 0, kMaxTreeRadix) : 0;
  if (radix == 1)
    throw Error(ErrorCode::InvalidArgument,
                std::string(given.name) + "=1 is out of range (0 or [2, " + std::to_string(kMaxTreeRadix) + "])");
  if (radix) s.tuning.radix = static_cast<int>(radix);
  return s;
}

}  // namespace coll
}  // namespace detail
}  // namespace tether
