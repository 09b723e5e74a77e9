#include "base/settings.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <mutex>
#include <set>
#include <stdexcept>

#include "base/env.hpp"
#include "base/log.hpp"
#include "tether/detail/defaults.hpp"
#include "tether/detail/env_int.hpp"
#include "tether/error.hpp"

namespace tether::settings {
namespace {

Variable make(const char* name, Tier tier, Type type) {
  Variable v;
  v.name = name;
  v.tier = tier;
  v.type = type;
  return v;
}

Variable number(const char* name, Tier tier, std::int64_t lo, std::int64_t hi, const char* fallback, const char* doc,
                bool zeroIsDefault = false) {
  Variable v = make(name, tier, Type::Integer);
  v.lo = lo;
  v.hi = hi;
  v.zeroIsDefault = zeroIsDefault;
  v.fallback = fallback;
  v.doc = doc;
  return v;
}

Variable choice(const char* name, Tier tier, std::vector<std::string> choices, const char* fallback, const char* doc) {
  Variable v = make(name, tier, Type::Choice);
  v.choices = std::move(choices);
  v.fallback = fallback;
  v.doc = doc;
  return v;
}

Variable text(const char* name, Tier tier, const char* doc) {
  Variable v = make(name, tier, Type::Text);
  v.fallback = "unset";
  v.doc = doc;
  return v;
}

Variable milliseconds(const char* name, Tier tier, const char* fallback, const char* doc) {
  Variable v = make(name, tier, Type::Milliseconds);
  v.fallback = fallback;
  v.doc = doc;
  return v;
}

constexpr std::int64_t kMaxRanks = std::int64_t{1} << 30;
constexpr std::int64_t kMaxCount = 1 << 20;  // links, ranks of a host

std::vector<Variable> makeTable() {
  using T = Tier;
  std::vector<Variable> t;
  // Launch.
  t.push_back(number("TETHER_RANK", T::Launch, 0, kMaxRanks - 1, "unset",
                     "this process's rank (with TETHER_NRANKS; overrides every launcher)"));
  t.push_back(number("TETHER_NRANKS", T::Launch, 1, kMaxRanks, "unset", "the number of ranks (with TETHER_RANK)"));
  t.push_back(text("TETHER_JOB_ID", T::Launch, "this launch's job id (checked in TETHER_UID_FILE)"));
  t.push_back(text("TETHER_UID", T::Launch, "a UniqueId::toString() handed to every rank"));
  t.push_back(text("TETHER_UID_FILE", T::Launch, "a path: rank 0 writes the id there, the others wait for it"));
  t.push_back(text("TETHER_ROOT", T::Launch, "host:port where rank 0 listens"));
  t.push_back(text("TETHER_SECRET", T::Launch, "the shared secret with TETHER_ROOT or MASTER_ADDR"));
  t.push_back(text("TETHER_HOST_ID", T::Launch, "this rank's host for the topology (unset: host name and boot id)"));
  // Interface.
  t.push_back(text("TETHER_SOCKET_IFNAME", T::Interface, "which interfaces to listen on (prefixes, ^exclude, =exact)"));
  t.push_back(
      choice("TETHER_SOCKET_FAMILY", T::Interface, {"AF_INET", "AF_INET6"}, "unset", "only addresses of this family"));
  // Timeout.
  t.push_back(
      milliseconds("TETHER_TIMEOUT_MS", T::Timeout, "300000", "deadline of construction and of each blocking call"));
  t.push_back(milliseconds("TETHER_HANDSHAKE_TIMEOUT_MS", T::Timeout, "10000",
                           "a connection's handshake must end this long after it began"));
  // Debug.
  Variable debug = choice("TETHER_DEBUG", T::Debug, {"NONE", "WARN", "INFO", "TRACE"}, "WARN", "log level (any case)");
  debug.anyCase = true;
  debug.warnOnly = true;
  t.push_back(debug);
  // Rendezvous.
  t.push_back(choice("TETHER_RENDEZVOUS", T::Rendezvous, {"root", "tree", "pmix", "auto"}, "auto",
                     "how ranks learn each other's addresses"));
  t.push_back(number("TETHER_HOST_LOCAL", T::Rendezvous, 0, 1, "1",
                     "1: with TETHER_RENDEZVOUS=auto, ranks of a host register through one host leader "
                     "(docs/scale.md, host-local); 0: off"));
  t.push_back(number("TETHER_LOCAL_NRANKS", T::Rendezvous, 0, kMaxCount, "0",
                     "ranks on this host, if known: the host leader then registers once (0: unknown)"));
  // RDMA (read by tether::rdma::Config::fromEnvironment, lib/rdma/config.cpp).
  t.push_back(text("TETHER_IB_HCA", T::Rdma, "device name or name:port"));
  t.push_back(number("TETHER_IB_GID_INDEX", T::Rdma, 0, 255, "chosen", "source GID index"));
  t.push_back(choice("TETHER_IB_ADDR_FAMILY", T::Rdma, {"AF_INET", "AF_INET6", "4", "6"}, "AF_INET",
                     "preferred RoCE GID family"));
  t.push_back(text("TETHER_IB_QP", T::Rdma,
                   "queue pair attributes, key=value,...: timeout, retry_cnt, rnr_retry, min_rnr_timer, sl, tc, "
                   "rd_atomic"));
  // Expert: links, liveness, limits, algorithms.
  t.push_back(number("TETHER_MAX_LINKS", T::Expert, 1, kMaxCount, "64", "soft budget of open links per rank"));
  t.push_back(number("TETHER_LIVENESS_S", T::Expert, kMinLivenessS, kMaxLivenessS, "16",
                     "a silent peer is lost after this many seconds (TCP keepalive and TCP_USER_TIMEOUT)"));
  t.push_back(number("TETHER_MAX_PAYLOAD_BYTES", T::Expert, static_cast<std::int64_t>(detail::kMinMaxPayloadBytes),
                     static_cast<std::int64_t>(detail::kMaxMaxPayloadBytes),
                     std::to_string(detail::kMaxPayloadBytes).c_str(), "largest data frame accepted"));
  t.push_back(number("TETHER_P2P_WINDOW_BYTES", T::Expert, detail::kMinP2PWindowBytes,
                     static_cast<std::int64_t>(detail::kMaxP2PWindowBytes),
                     std::to_string(detail::kP2PWindowBytes).c_str(),
                     "point-to-point bytes (payload + 128 per message) a rank may have sent to one peer that "
                     "the peer has not received; past it sends wait"));
  t.push_back(text("TETHER_ALGO", T::Expert,
                   "debug override of the collective algorithms, key=value,...: allgather, alltoall, broadcast, "
                   "barrier, tree_radix, large_bytes, chunk_bytes"));
  return t;
}

bool sameChoice(const Variable& v, const std::string& value, const std::string& c) {
  if (!v.anyCase) return value == c;
  return value.size() == c.size() && std::equal(value.begin(), value.end(), c.begin(), [](char a, char b) {
           return std::toupper(static_cast<unsigned char>(a)) == std::toupper(static_cast<unsigned char>(b));
         });
}

// "root, tree, pmix or auto".
std::string oneOf(const Variable& v) {
  std::string out;
  for (std::size_t i = 0; i < v.choices.size(); ++i)
    out += (i == 0 ? "" : i + 1 == v.choices.size() ? " or " : ", ") + v.choices[i];
  return out;
}

// `value` of variable `v`, found under `name`.
void check(const Variable& v, const char* name, const std::string& value) {
  switch (v.type) {
    case Type::Integer: {
      if (v.zeroIsDefault && value == "0") return;
      if (v.zeroIsDefault) {
        const std::int64_t x = detail::parseEnvInt(name, value.c_str(), INT64_MIN, INT64_MAX);
        if (x == 0) return;
        if (x < v.lo || x > v.hi)
          throw Error(ErrorCode::InvalidArgument, fmt::format("{}={} is out of range ({})", name, value, rangeText(v)));
        return;
      }
      (void)detail::parseEnvInt(name, value.c_str(), v.lo, v.hi);
      return;
    }
    case Type::Milliseconds:  // a negative value's message names the default
      (void)env::parseMs(name, value, std::chrono::milliseconds(std::stoll(v.fallback)));
      return;
    case Type::Choice:
      if (v.warnOnly) return;  // its reader logs a WARN naming it
      for (const auto& c : v.choices)
        if (sameChoice(v, value, c)) return;
      throw Error(ErrorCode::InvalidArgument, fmt::format("{}='{}' is not one of {}", name, value, oneOf(v)));
    case Type::Text:
      return;
  }
}

detail::EnvValue lookup(const Variable& v) { return detail::envValue(v.name.c_str()); }

// Variables dropped or folded in issue 24 (docs/configuration.md) and what
// replaces each: one that is still set is not read, and a WARN says so.
struct Dropped {
  const char* name;
  const char* use;
};
constexpr Dropped kDropped[] = {
    {"TETHER_KEEPALIVE_IDLE_S", "TETHER_LIVENESS_S"},
    {"TETHER_KEEPALIVE_INTERVAL_S", "TETHER_LIVENESS_S"},
    {"TETHER_KEEPALIVE_COUNT", "TETHER_LIVENESS_S"},
    {"TETHER_ALGO_ALLGATHER", "TETHER_ALGO=allgather=..."},
    {"TETHER_ALGO_ALLTOALL", "TETHER_ALGO=alltoall=..."},
    {"TETHER_ALGO_BROADCAST", "TETHER_ALGO=broadcast=..."},
    {"TETHER_ALGO_BARRIER", "TETHER_ALGO=barrier=..."},
    {"TETHER_ALGO_TREE_RADIX", "TETHER_ALGO=tree_radix=..."},
    {"TETHER_TREE_RADIX", "TETHER_ALGO=tree_radix=..."},
    {"TETHER_ALGO_LARGE_BYTES", "TETHER_ALGO=large_bytes=..."},
    {"TETHER_PIPELINE_CHUNK_BYTES", "TETHER_ALGO=chunk_bytes=..."},
    {"TETHER_RENDEZVOUS_TREE_RADIX", "TcpOptions::rendezvousTreeRadix"},
    {"TETHER_RENDEZVOUS_RADIX", "TcpOptions::rendezvousTreeRadix"},
    {"TETHER_MAX_DIALS", "TcpOptions::maxDials"},
    {"TETHER_HOST_GROUP_MAX", "TcpOptions::hostGroupMax"},
    {"TETHER_POLL_US", "TcpOptions::pollUs"},
    {"TETHER_IB_TIMEOUT", "TETHER_IB_QP=timeout=..."},
    {"TETHER_IB_RETRY_CNT", "TETHER_IB_QP=retry_cnt=..."},
    {"TETHER_IB_RNR_RETRY", "TETHER_IB_QP=rnr_retry=..."},
    {"TETHER_IB_MIN_RNR_TIMER", "TETHER_IB_QP=min_rnr_timer=..."},
    {"TETHER_IB_SL", "TETHER_IB_QP=sl=..."},
    {"TETHER_IB_TC", "TETHER_IB_QP=tc=..."},
    {"TETHER_IB_RD_ATOMIC", "TETHER_IB_QP=rd_atomic=..."},
};

// Once per process and name.
void warnDropped() {
  static std::mutex m;
  static std::set<std::string> warned;
  for (const auto& d : kDropped) {
    if (!detail::envValue(d.name)) continue;
    {
      std::lock_guard<std::mutex> lock(m);
      if (!warned.insert(d.name).second) continue;
    }
    log::warn(-1, "{} is no longer read (issue 24): use {}", d.name, d.use);
  }
}

}  // namespace

const std::vector<Variable>& all() {
  static const std::vector<Variable> table = makeTable();
  return table;
}

const Variable& find(std::string_view name) {
  for (const auto& v : all())
    if (v.name == name) return v;
  throw std::out_of_range("no TETHER_* variable " + std::string(name) + " in the table");
}

const char* tierName(Tier t) {
  switch (t) {
    case Tier::Launch:
      return "launch";
    case Tier::Interface:
      return "interface";
    case Tier::Timeout:
      return "timeout";
    case Tier::Debug:
      return "debug";
    case Tier::Rendezvous:
      return "rendezvous";
    case Tier::Rdma:
      return "rdma";
    case Tier::Expert:
      return "expert";
  }
  return "?";
}

const char* typeName(Type t) {
  switch (t) {
    case Type::Integer:
      return "integer";
    case Type::Milliseconds:
      return "milliseconds";
    case Type::Choice:
      return "choice";
    case Type::Text:
      return "text";
  }
  return "?";
}

std::string rangeText(const Variable& v) {
  switch (v.type) {
    case Type::Integer:
      return fmt::format("{}[{}, {}]", v.zeroIsDefault ? "0 or " : "", v.lo, v.hi);
    case Type::Milliseconds:
      return "0 or more (0: the default)";
    case Type::Choice: {
      std::string out;
      for (const auto& c : v.choices) out += (out.empty() ? "" : ", ") + c;
      return out;
    }
    case Type::Text:
      return "any";
  }
  return "";
}

Values Values::read(std::string_view who) {
  warnDropped();
  Values out;
  for (const auto& v : all()) {
    const auto value = lookup(v);
    if (!value) continue;
    try {
      check(v, value.name, value.text);
    } catch (const Error& e) {
      throw Error(e.code(), fmt::format("{}{}", who, e.what()));
    }
    out.given_.emplace(v.name, value.text);
  }
  return out;
}

std::optional<std::string> Values::text(std::string_view name) const {
  (void)find(name);  // a name not in the table is a bug
  auto it = given_.find(name);
  if (it == given_.end()) return std::nullopt;
  return it->second;
}

std::int64_t Values::integer(std::string_view name) const {
  const Variable& v = find(name);
  auto it = given_.find(name);
  return std::stoll(it == given_.end() ? v.fallback : it->second);  // checked by read()
}

std::chrono::milliseconds Values::milliseconds(std::string_view name, std::chrono::milliseconds fallback) const {
  auto given = text(name);
  if (!given) return fallback;
  return env::parseMs(find(name).name.c_str(), *given, fallback);
}

void validateAll(std::string_view who) { (void)Values::read(who); }

Keepalive keepaliveFor(std::int64_t livenessS) {
  Keepalive k;
  k.count = 3;
  k.intervalS = static_cast<int>(std::max<std::int64_t>(1, livenessS / 8));
  k.idleS = static_cast<int>(std::max<std::int64_t>(1, livenessS - k.count * std::int64_t{k.intervalS}));
  return k;
}

std::int64_t integer(const char* name) {
  const Variable& v = find(name);
  const auto value = lookup(v);
  if (!value) return std::stoll(v.fallback);
  check(v, value.name, value.text);
  return std::stoll(value.text);
}

std::optional<std::string> text(const char* name) {
  const Variable& v = find(name);
  const auto value = lookup(v);
  if (!value) return std::nullopt;
  check(v, value.name, value.text);
  return std::string(value.text);
}

}  // namespace tether::settings
