// Reading the RDMA tunables from the environment; bad values are errors, never ignored.
#include "tether/rdma/config.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <charconv>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "base/env.hpp"
#include "base/settings.hpp"
#include "tether/detail/env_int.hpp"
#include "tether/error.hpp"

namespace tether::rdma {
namespace {

[[noreturn]] void bad(const char* name, std::string_view value, const std::string& want) {
  throw Error(ErrorCode::InvalidArgument, fmt::format("rdma config: {}=\"{}\" is not valid ({})", name, value, want));
}

// The variable as an integer in its range of the table of variables
// (lib/base/settings.cpp), with the one integer parser.
int parseInt(const char* name, std::string_view text) {
  const settings::Variable& v = settings::find(name);
  try {
    return static_cast<int>(detail::parseEnvInt(name, std::string(text).c_str(), v.lo, v.hi));
  } catch (const Error& e) {
    const bool range = std::string_view(e.what()).find("out of range") != std::string_view::npos;
    bad(name, text, range ? fmt::format("out of range [{}, {}]", v.lo, v.hi) : "not an integer");
  }
}

// Applies the variable when it is set and non-empty.
template <typename Apply>
void fromEnv(const char* name, Apply apply) {
  (void)settings::find(name);  // a variable of the table
  if (auto value = env::get(name)) apply(std::string_view(*value));
}

// The keys of TETHER_IB_QP: queue pair attributes a site sets rarely, so
// one variable holds them (docs/rdma.md).
struct QpKey {
  const char* key;
  int lo, hi;
  std::uint8_t Config::*field;
};
constexpr QpKey kQpKeys[] = {
    {"timeout", 1, 31, &Config::timeout},    {"retry_cnt", 0, 7, &Config::retryCount},
    {"rnr_retry", 0, 7, &Config::rnrRetry},  {"min_rnr_timer", 0, 31, &Config::minRnrTimer},
    {"sl", 0, 15, &Config::serviceLevel},    {"tc", 0, 255, &Config::trafficClass},
    {"rd_atomic", 1, 16, &Config::rdAtomic},
};

// "timeout=14,sl=3": each key once, each value a decimal integer in its range.
void parseQp(std::string_view text, Config& c) {
  const char* name = "TETHER_IB_QP";
  std::string keys, seen = ",";
  for (const auto& k : kQpKeys) keys += (keys.empty() ? "" : ", ") + std::string(k.key);
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    const std::string item(text.substr(at, comma - at));
    at = comma + 1;
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) bad(name, text, fmt::format("'{}' is not key=value; keys: {}", item, keys));
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (seen.find("," + key + ",") != std::string::npos) bad(name, text, key + " is given twice");
    seen += key + ",";
    const QpKey* found = nullptr;
    for (const auto& k : kQpKeys)
      if (key == k.key) found = &k;
    if (!found) bad(name, text, fmt::format("unknown key '{}'; keys: {}", key, keys));
    try {
      c.*(found->field) =
          static_cast<std::uint8_t>(detail::parseEnvInt(key.c_str(), value.c_str(), found->lo, found->hi));
    } catch (const Error& e) {
      bad(name, text, e.what());
    }
  }
}

}  // namespace

Config::Config() : addressFamily(AF_INET) {}

namespace {
Config fromEnvironmentUnranked();
}  // namespace

void parseHca(const std::string& text, Config& config) {
  const auto colon = text.find(':');
  const std::string name = text.substr(0, colon);
  if (name.empty() || name.size() >= 64 || name.find_first_of(" ,^=") != std::string::npos)
    bad("TETHER_IB_HCA", text, "want one device name, optionally :port, e.g. mlx5_0:1");
  config.hca = name;
  config.hcaPort = 0;
  if (colon == std::string::npos) return;
  const std::string_view port = std::string_view(text).substr(colon + 1);
  int value = 0;
  auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || ptr != port.data() + port.size() || value < 1 || value > 255)
    bad("TETHER_IB_HCA", text, "want a port number 1..255 after ':', e.g. mlx5_0:1");
  config.hcaPort = value;
}

Config Config::fromEnvironment(int rank) {
  try {
    return fromEnvironmentUnranked();
  } catch (const Error& e) {
    if (rank < 0) throw;
    throw Error(e.code(), fmt::format("rank {}: {}", rank, e.what()), rank);
  }
}

namespace {
Config fromEnvironmentUnranked() {
  Config c;
  fromEnv("TETHER_IB_HCA", [&](std::string_view v) { parseHca(std::string(v), c); });
  fromEnv("TETHER_IB_GID_INDEX", [&](std::string_view v) { c.gidIndex = parseInt("TETHER_IB_GID_INDEX", v); });
  fromEnv("TETHER_IB_ADDR_FAMILY", [&](std::string_view v) {
    if (v == "AF_INET" || v == "4") {
      c.addressFamily = AF_INET;
    } else if (v == "AF_INET6" || v == "6") {
      c.addressFamily = AF_INET6;
    } else {
      bad("TETHER_IB_ADDR_FAMILY", v, "want AF_INET or AF_INET6");
    }
  });
  fromEnv("TETHER_IB_QP", [&](std::string_view v) { parseQp(v, c); });
  return c;
}
}  // namespace

}  // namespace tether::rdma
