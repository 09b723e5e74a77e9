// The table of every TETHER_* variable the library reads (docs/configuration.md
// shows the same table; test/launch/settings_test.cpp checks they agree):
// name, tier, type, range or choices, default, one line of doc. validateAll()
// checks every set variable against it when a bootstrap starts.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/layer.hpp"

TETHER_LAYER(0, "base");

namespace tether::settings {

// What users set (launch, interface, timeout, debug, rendezvous), the RDMA
// module's, and expert tuning.
enum class Tier { Launch, Interface, Timeout, Debug, Rendezvous, Rdma, Expert };
// Integer: decimal in [lo, hi]; Milliseconds: an integer >= 0, 0 = the default;
// Choice: one of `choices`; Text: any string (its reader checks its form).
enum class Type { Integer, Milliseconds, Choice, Text };

struct Variable {
  std::string name;
  Tier tier = Tier::Expert;
  Type type = Type::Text;
  std::int64_t lo = 0, hi = 0;  // Integer
  bool zeroIsDefault = false;   // Integer: 0 is also accepted (the default)
  std::vector<std::string> choices;
  bool anyCase = false;   // Choice: compared case-insensitively
  bool warnOnly = false;  // Choice: another value is logged (WARN), not refused (TETHER_DEBUG)
  std::string fallback;   // the default, as docs/configuration.md shows it
  std::string doc;
};

const std::vector<Variable>& all();
// Throws std::out_of_range for a name not in the table.
const Variable& find(std::string_view name);
const char* tierName(Tier t);  // "launch", "interface", ..., "rdma", "expert"
const char* typeName(Type t);  // "integer", "milliseconds", "choice", "text"
// The range column: "[1, 127]", "0 or [2, 1048576]", "root, tree, pmix, auto", "any".
std::string rangeText(const Variable& v);

// The configuration: every variable of the table, read from the environment
// once, when a bootstrap starts, and checked there; its reads then cannot fail.
class Values {
 public:
  // Reads every variable of the table that is set (and not empty). Throws
  // Error{InvalidArgument} naming the first bad one and its value, e.g.
  // "TETHER_LIVENESS_S=0 is out of range [4, 32767]"; `who` ("rank 2: ") is
  // put in front. Text variables are checked by their readers
  // (TETHER_ALGO: coll::checkSettings).
  static Values read(std::string_view who);

  // `name` (a variable of the table) as given; nullopt when unset.
  std::optional<std::string> text(std::string_view name) const;
  // An Integer variable: its value, its default when unset.
  std::int64_t integer(std::string_view name) const;
  // A Milliseconds variable: its value; `fallback` when unset or 0.
  std::chrono::milliseconds milliseconds(std::string_view name, std::chrono::milliseconds fallback) const;

 private:
  std::map<std::string, std::string, std::less<>> given_;  // table name -> text
};

// TETHER_LIVENESS_S: a silent peer is lost this many seconds after its last
// byte. TCP keepalive then probes after idleS, every intervalS, count times
// (idleS + intervalS x count = the bound; 16 s: 10, 2, 3), and
// TCP_USER_TIMEOUT is set to the same total.
constexpr std::int64_t kMinLivenessS = 4, kMaxLivenessS = 32767;
struct Keepalive {
  int idleS = 0, intervalS = 0, count = 0;
};
Keepalive keepaliveFor(std::int64_t livenessS);

// Values::read, keeping nothing: checks every set variable.
void validateAll(std::string_view who);

// An Integer variable of the table read now (for readers outside a
// bootstrap's start): its default when unset; out of range or not an
// integer: Error{InvalidArgument} naming it.
std::int64_t integer(const char* name);
// Any variable of the table read now, the same way (checked): nullopt when unset. For the process-wide TETHER_DEBUG
// (read at the first log line) and callers outside a bootstrap (createUniqueId).
std::optional<std::string> text(const char* name);

}  // namespace tether::settings
