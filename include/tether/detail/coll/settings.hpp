// tether/detail/coll/settings.hpp — the algorithm settings from the
// environment (docs/configuration.md): one debug override, TETHER_ALGO, a
// comma-separated list of key=value: allgather, alltoall, broadcast and
// barrier name a row of the table (or "auto"); tree_radix, large_bytes and
// chunk_bytes tune them ("allgather=ring,alltoall=bruck,tree_radix=8"). Read
// the same way by every world, so the same environment picks the same
// algorithm. The library's table of variables (lib/base/settings.cpp) lists
// TETHER_ALGO as text: this reader checks it (coll::checkSettings, when a
// bootstrap starts). Header-only, C++17.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
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

constexpr const char* kAlgoVariable = "TETHER_ALGO";
// The ranges of the tuning keys.
constexpr std::int64_t kMaxLargeBytes = std::int64_t{1} << 40;
constexpr std::int64_t kMinChunk = 4096, kMaxChunk = std::int64_t{1} << 30;
constexpr std::int64_t kMaxTreeRadix = 1 << 20;

// The keys of TETHER_ALGO, in the order an error lists them.
constexpr const char* kAlgoKeys = "allgather, alltoall, broadcast, barrier, tree_radix, large_bytes or chunk_bytes";

inline Error algoError(const std::string& given, const std::string& why) {
  return Error(ErrorCode::InvalidArgument, std::string(kAlgoVariable) + "='" + given + "': " + why);
}

// `value` of family key `key`: "" for auto, else a row of the table.
inline std::string algoRow(const std::string& given, const std::string& key, const std::string& value, Op family) {
  if (value == "auto") return "";
  if (findAlgorithm(family, value.c_str())) return value;
  std::string allowed = "auto";
  for (const auto& a : kAlgorithms)
    if (a.family == family) allowed += std::string(", ") + a.name;
  throw algoError(given, key + "=" + value + " is not one of " + allowed);
}

// TETHER_ALGO's text (nullptr or "": nothing forced, the defaults). Throws
// Error{InvalidArgument} naming the variable, its value and the bad item.
// The families TETHER_ALGO can force a row of, and their keys.
constexpr Op kFamilies[] = {Op::Allgather, Op::Alltoall, Op::Broadcast, Op::Barrier};
constexpr const char* kFamilyKeys[] = {"allgather", "alltoall", "broadcast", "barrier"};

// Settings as normalised TETHER_ALGO text, every key given:
// "allgather=auto,alltoall=ring,...,tree_radix=0,large_bytes=65536,chunk_bytes=262144".
inline std::string describe(const Settings& s) {
  std::string text;
  for (std::size_t i = 0; i < 4; ++i) {
    const char* row = s.forcedFor(kFamilies[i]);
    text += std::string(kFamilyKeys[i]) + "=" + (*row ? row : "auto") + ",";
  }
  return text + "tree_radix=" + std::to_string(s.tuning.radix) + ",large_bytes=" + std::to_string(s.tuning.largeBytes) +
         ",chunk_bytes=" + std::to_string(s.tuning.chunk);
}

inline Settings parseAlgo(const char* text) {
  Settings s;
  if (!text || !*text) return s;
  const std::string given = text;
  std::string seen = ",";
  std::size_t at = 0;
  while (at <= given.size()) {
    const std::size_t comma = std::min(given.find(',', at), given.size());
    const std::string item = given.substr(at, comma - at);
    at = comma + 1;
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      throw algoError(given, "'" + item + "' is not key=value (keys: " + kAlgoKeys + ")");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (seen.find("," + key + ",") != std::string::npos) throw algoError(given, key + " is given twice");
    seen += key + ",";
    auto integer = [&](std::int64_t lo, std::int64_t hi) {
      try {
        return parseEnvInt(key.c_str(), value.c_str(), lo, hi);
      } catch (const Error& e) {
        throw algoError(given, e.what());
      }
    };
    bool family = false;
    for (std::size_t i = 0; i < 4; ++i)
      if (key == kFamilyKeys[i]) {
        s.forced[static_cast<std::size_t>(kFamilies[i])] = algoRow(given, key, value, kFamilies[i]);
        family = true;
      }
    if (family) continue;
    if (key == "tree_radix") {
      // 0: the default (flat up to 64 ranks: docs/benchmarks.md); 1 is no tree.
      const std::int64_t radix = integer(0, kMaxTreeRadix);
      if (radix == 1)
        throw algoError(given, "tree_radix=1 is out of range (0 or [2, " + std::to_string(kMaxTreeRadix) + "])");
      if (radix) s.tuning.radix = static_cast<int>(radix);
    } else if (key == "large_bytes") {
      s.tuning.largeBytes = static_cast<std::size_t>(integer(0, kMaxLargeBytes));
    } else if (key == "chunk_bytes") {
      s.tuning.chunk = static_cast<std::size_t>(integer(kMinChunk, kMaxChunk));
    } else {
      throw algoError(given, "unknown key '" + key + "' (keys: " + kAlgoKeys + ")");
    }
  }
  return s;
}

// TETHER_ALGO from the environment, parsed as above.
inline Settings loadSettings() { return parseAlgo(envValue(kAlgoVariable).text); }

// The shape of a communicator's rank `rank` of `size` under `settings`
// (`cpuBound`: its node runs more ranks than it has cores).
inline Shape shapeOf(const Settings& settings, int rank, int size, bool cpuBound) {
  Shape s = settings.tuning;
  s.rank = rank;
  s.size = size;
  s.cpuBound = cpuBound;
  return s;
}

// A communicator's algorithm choice, in every world: the algorithm of its
// last collective and what it was chosen for, so a call of the same
// operation and size runs it again without choosing (the choice reads only
// those, the shape and the process's settings, which do not change).
struct Choice {
  // The algorithm for `call` on rank `rank` of `size` (`cpuBound` as
  // shapeOf's) under the process's settings, `settings()` (read only for a
  // new choice); shape is then its shape.
  template <class GetSettings>
  const Algorithm& of(GetSettings&& settings, int rank, int size, bool cpuBound, const Call& call) {
    if (!algo || op != call.op || bytes != call.bytes) {
      const Settings& s = settings();
      shape = shapeOf(s, rank, size, cpuBound);
      algo = choose(shape, call, s.forcedFor(call.op));
      op = call.op;
      bytes = call.bytes;
    }
    return *algo;
  }

  Shape shape;
  Op op{};
  std::size_t bytes = 0;
  const Algorithm* algo = nullptr;
};

}  // namespace coll
}  // namespace detail
}  // namespace tether
