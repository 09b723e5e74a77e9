#include "base/env.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "tether/bootstrap.hpp"
#include "tether/detail/env_int.hpp"
#include "tether/error.hpp"

namespace tether::env {

std::optional<std::string> get(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

std::optional<std::int64_t> getInt(const char* name) {
  auto v = get(name);
  if (!v) return std::nullopt;
  return detail::parseEnvInt(name, v->c_str(), INT64_MIN, INT64_MAX);
}

std::int64_t getInt(const char* name, std::int64_t fallback) { return getInt(name).value_or(fallback); }

namespace {
constexpr std::chrono::milliseconds kMaxTimeout = std::chrono::hours(24 * 365 * 10);
}

std::chrono::milliseconds parseMs(const char* name, const std::string& text, std::chrono::milliseconds fallback) {
  const std::int64_t v = detail::parseEnvInt(name, text.c_str(), INT64_MIN, INT64_MAX);
  if (v < 0)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("{}='{}' is negative: give milliseconds (0 or unset: the default, {} ms)", name, v,
                            fallback.count()));
  if (v == 0) return fallback;
  return std::min(std::chrono::milliseconds(v), kMaxTimeout);
}

std::chrono::milliseconds getMs(const char* name, std::chrono::milliseconds fallback) {
  auto v = get(name);
  return v ? parseMs(name, *v, fallback) : fallback;
}

std::chrono::milliseconds defaultTimeout() { return getMs("TETHER_TIMEOUT_MS", kDefaultTimeout); }

std::chrono::milliseconds resolveTimeout(std::chrono::milliseconds given, std::string_view source) {
  if (given.count() < 0)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("{}: negative timeout {} ms (0 means the default: TETHER_TIMEOUT_MS, else {} ms)", source,
                            given.count(), kDefaultTimeout.count()));
  if (given.count() == 0) return defaultTimeout();
  return std::min(given, kMaxTimeout);
}

}  // namespace tether::env
