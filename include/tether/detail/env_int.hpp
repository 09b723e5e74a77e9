// tether/detail/env_int.hpp — the one parser of integer environment
// variables, shared by the library (lib/base/settings.cpp) and the
// header-only testing world: decimal, nothing else in the text.
// Header-only, C++17.
#pragma once

#include <charconv>
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

// The variable, parsed as above; `fallback` when it is unset or empty.
inline std::int64_t envInt(const char* name, std::int64_t fallback, std::int64_t lo, std::int64_t hi) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  return parseEnvInt(name, v, lo, hi);
}

}  // namespace detail
}  // namespace tether
