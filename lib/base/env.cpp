#include "base/env.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "tether/detail/defaults.hpp"
#include "tether/detail/env_int.hpp"
#include "tether/error.hpp"

namespace tether::env {

std::optional<std::string> get(const char* name) {
  const detail::EnvValue v = detail::envValue(name);  // the one reader (tether/detail/env_int.hpp)
  if (!v) return std::nullopt;
  return std::string(v.text);
}

std::optional<std::int64_t> getInt(const char* name) {
  auto v = get(name);
  if (!v) return std::nullopt;
  return detail::parseEnvInt(name, v->c_str(), INT64_MIN, INT64_MAX);
}

std::int64_t getInt(const char* name, std::int64_t fallback) { return getInt(name).value_or(fallback); }

namespace {
constexpr std::chrono::milliseconds kMaxTimeout = detail::kMaxEnvMs;
}

std::chrono::milliseconds parseMs(const char* name, const std::string& text, std::chrono::milliseconds fallback) {
  return detail::parseEnvMs(name, text.c_str(), fallback);
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
