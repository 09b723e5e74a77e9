// tether/detail/env_int.hpp — the one parser of integer environment
// variables, shared by the library (lib/base/settings.cpp) and the
// header-only testing world: decimal, nothing else in the text.
// Header-only, C++17.
#pragma once

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <system_error>

#include "tether/error.hpp"

namespace tether {
namespace detail {

// `text` (the value of variable `name`) as an integer in [lo, hi]. Throws
// Error{InvalidArgument}: "NAME='text' is not an integer", or
// "NAME=text is out of range [lo, hi]" (also for a number too large for 64 bits).
inline std::int64_t parseEnvInt(const char* name, const char* text, std::int64_t lo, std::int64_t hi) {
  const char* end = text + std::strlen(text);
  std::int64_t value = 0;
  const auto r = std::from_chars(text, end, value);
  const bool digits = r.ptr == end && r.ptr != text;
  if (!digits || (r.ec != std::errc() && r.ec != std::errc::result_out_of_range))
    throw Error(ErrorCode::InvalidArgument, std::string(name) + "='" + text + "' is not an integer");
  if (r.ec == std::errc::result_out_of_range || value < lo || value > hi)
    throw Error(ErrorCode::InvalidArgument, std::string(name) + "=" + text + " is out of range [" + std::to_string(lo) +
                                                ", " + std::to_string(hi) + "]");
  return value;
}

// A variable that is set: its name and its text.
struct EnvValue {
  const char* name = nullptr;
  const char* text = nullptr;
  explicit operator bool() const { return text != nullptr; }
};

// Variable `name`; unset or empty: nothing.
inline EnvValue envValue(const char* name) {
  const char* v = std::getenv(name);
  if (v && *v) return {name, v};
  return {};
}

// The rule of every timeout variable (docs/configuration.md): `text` (the
// value of variable `name`) in milliseconds; 0 reads as `fallback`; a
// negative value is Error{InvalidArgument} naming it; values beyond ten years
// are capped (no deadline arithmetic can overflow).
constexpr std::chrono::milliseconds kMaxEnvMs = std::chrono::hours(24 * 365 * 10);
inline std::chrono::milliseconds parseEnvMs(const char* name, const char* text, std::chrono::milliseconds fallback) {
  const std::int64_t v = parseEnvInt(name, text, INT64_MIN, INT64_MAX);
  if (v < 0)
    throw Error(ErrorCode::InvalidArgument, std::string(name) + "='" + std::to_string(v) +
                                                "' is negative: give milliseconds (0 or unset: the default, " +
                                                std::to_string(fallback.count()) + " ms)");
  if (v == 0) return fallback;
  return std::min(std::chrono::milliseconds(v), kMaxEnvMs);
}

// The variable, parsed as above; `fallback` when unset or empty.
inline std::int64_t envInt(const char* name, std::int64_t fallback, std::int64_t lo, std::int64_t hi) {
  const EnvValue v = envValue(name);
  if (!v) return fallback;
  return parseEnvInt(v.name, v.text, lo, hi);
}

}  // namespace detail
}  // namespace tether
