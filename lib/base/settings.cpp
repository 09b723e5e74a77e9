#include "base/settings.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <stdexcept>

#include "base/env.hpp"
#include "base/log.hpp"
#include "tether/detail/coll/settings.hpp"
#include "tether/detail/coll/table.hpp"
#include "tether/detail/env_int.hpp"
#include "tether/error.hpp"

namespace tether::settings {
namespace {

namespace dc = detail::coll;

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

// "auto" and the rows of the algorithm table for one family.
std::vector<std::string> algorithms(dc::Op family) {
  std::vector<std::string> names{"auto"};
  for (const auto& a : dc::kAlgorithms)
    if (a.family == family) names.emplace_back(a.name);
  return names;
}

constexpr std::int64_t kMaxRanks = std::int64_t{1} << 30;
constexpr std::int64_t kMaxCount = 1 << 20;  // links, dials, radices

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
  t.push_back(number("TETHER_RENDEZVOUS_TREE_RADIX", T::Rendezvous, 2, kMaxCount, "8",
                     "radix of the tree rendezvous' k-nomial tree"));
  t.back().formerName = "TETHER_RENDEZVOUS_RADIX";
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
  t.push_back(number("TETHER_IB_TIMEOUT", T::Rdma, 1, 31, "20", "local ACK timeout (4.096 us x 2^value)"));
  t.push_back(number("TETHER_IB_RETRY_CNT", T::Rdma, 0, 7, "7", "transport retries"));
  t.push_back(number("TETHER_IB_RNR_RETRY", T::Rdma, 0, 7, "7", "receiver-not-ready retries (7 = forever)"));
  t.push_back(number("TETHER_IB_MIN_RNR_TIMER", T::Rdma, 0, 31, "12", "RNR NAK timer code advertised"));
  t.push_back(number("TETHER_IB_SL", T::Rdma, 0, 15, "0", "service level"));
  t.push_back(number("TETHER_IB_TC", T::Rdma, 0, 255, "0", "traffic class in the GRH"));
  t.push_back(number("TETHER_IB_RD_ATOMIC", T::Rdma, 1, 16, "1", "outstanding RDMA reads/atomics"));
  // Expert: links, liveness, limits, algorithms.
  t.push_back(number("TETHER_MAX_LINKS", T::Expert, 1, kMaxCount, "64", "soft budget of open links per rank"));
  t.push_back(number("TETHER_MAX_DIALS", T::Expert, 1, kMaxCount, "32", "dials in flight per rank"));
  t.push_back(number("TETHER_KEEPALIVE_IDLE_S", T::Expert, 1, 32767, "10", "TCP keepalive: idle seconds"));
  t.push_back(number("TETHER_KEEPALIVE_INTERVAL_S", T::Expert, 1, 32767, "2", "seconds between probes"));
  t.push_back(number("TETHER_KEEPALIVE_COUNT", T::Expert, 1, 127, "3", "unanswered probes before a peer is lost"));
  t.push_back(number("TETHER_MAX_PAYLOAD_BYTES", T::Expert, 64 * 1024, std::int64_t{1} << 40, "1073741824",
                     "largest data frame accepted"));
  t.push_back(number("TETHER_P2P_WINDOW_BYTES", T::Expert, 64 * 1024, std::int64_t{1} << 40, "4194304",
                     "point-to-point bytes (payload + 128 per message) a rank may have sent to one peer that "
                     "the peer has not received; past it sends wait"));
  t.push_back(number("TETHER_POLL_US", T::Expert, 0, 1000000, "50",
                     "a blocking call polls this long before it sleeps, where cores are free; 0: off"));
  t.push_back(number("TETHER_HOST_GROUP_MAX", T::Expert, 2, 1024, "64",
                     "host-local aggregation: at most this many ranks meet in one group (docs/scale.md)"));
  t.push_back(
      choice("TETHER_ALGO_ALLGATHER", T::Expert, algorithms(dc::Op::Allgather), "auto", "all-gather algorithm"));
  t.push_back(choice("TETHER_ALGO_ALLTOALL", T::Expert, algorithms(dc::Op::Alltoall), "auto", "all-to-all algorithm"));
  t.push_back(choice("TETHER_ALGO_BROADCAST", T::Expert, algorithms(dc::Op::Broadcast), "auto", "broadcast algorithm"));
  t.push_back(choice("TETHER_ALGO_BARRIER", T::Expert, algorithms(dc::Op::Barrier), "auto", "barrier algorithm"));
  t.push_back(number(dc::kTreeRadix, T::Expert, 2, dc::kMaxTreeRadix, "64",
                     "radix of the tree all-gather, all-to-all and barrier", true));
  t.back().formerName = dc::kFormerTreeRadix;
  t.push_back(number("TETHER_ALGO_LARGE_BYTES", T::Expert, 0, dc::kMaxLargeBytes, "65536",
                     "the small/large threshold of the automatic choice"));
  t.push_back(number("TETHER_PIPELINE_CHUNK_BYTES", T::Expert, dc::kMinChunk, dc::kMaxChunk, "262144",
                     "chunk of the pipelined broadcast"));
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

// `value` of variable `v`, found under `name` (v.name or its former name).
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

// The variable's value under its name or its former name (warning once).
detail::EnvValue lookup(const Variable& v) {
  static const bool toLog = (
      detail::renameWarning() = [](const std::string& text) { log::warn(-1, "{}", text); }, true);
  (void)toLog;
  return detail::envValue(v.name.c_str(), v.formerName.empty() ? nullptr : v.formerName.c_str());
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
