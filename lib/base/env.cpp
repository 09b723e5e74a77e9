#include "base/env.hpp"

#include <charconv>
#include <cstdlib>

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
  std::int64_t out = 0;
  auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
  if (ec != std::errc() || end != v->data() + v->size())
    throw Error(ErrorCode::InvalidArgument,
                std::string(name) + "='" + *v + "' is not an integer");
  return out;
}

std::int64_t getInt(const char* name, std::int64_t fallback) {
  return getInt(name).value_or(fallback);
}

std::chrono::milliseconds getMs(const char* name, std::chrono::milliseconds fallback) {
  auto v = getInt(name);
  return v ? std::chrono::milliseconds(*v) : fallback;
}

}  // namespace tether::env
