// The table of TETHER_* variables (lib/base/settings.cpp): every set variable
// is checked when a bootstrap starts (constructor, fromEnvironment, the C
// ABI's init), the error names it and its value, and docs/configuration.md
// shows the same table (name, tier, type, range, default).
#include <unistd.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/settings.hpp"
#include "env_guard.hpp"
#include "multiproc.hpp"
#include "tether/tether.h"
#include "tether/tether.hpp"

using namespace tether;
using tether::test::EnvGuard;

namespace {

struct Bad {
  const char* name;
  const char* value;
  const char* says;
};

// Accepted silently before (issue 16), and an out-of-range and a junk integer.
const std::vector<Bad> kBad = {
    {"TETHER_RENDEZVOUS_TREE_RADIX", "1", "TETHER_RENDEZVOUS_TREE_RADIX=1 is out of range [2, 1048576]"},
    {"TETHER_KEEPALIVE_COUNT", "0", "TETHER_KEEPALIVE_COUNT=0 is out of range [1, 127]"},
    {"TETHER_PIPELINE_CHUNK_BYTES", "10", "TETHER_PIPELINE_CHUNK_BYTES=10 is out of range [4096, 1073741824]"},
    {"TETHER_MAX_PAYLOAD_BYTES", "0", "TETHER_MAX_PAYLOAD_BYTES=0 is out of range [65536, 1099511627776]"},
    {"TETHER_MAX_LINKS", "99999999999999999999", "TETHER_MAX_LINKS=99999999999999999999 is out of range [1, 1048576]"},
    {"TETHER_KEEPALIVE_IDLE_S", "ten", "TETHER_KEEPALIVE_IDLE_S='ten' is not an integer"},
    {"TETHER_RENDEZVOUS", "star", "TETHER_RENDEZVOUS='star' is not one of root, tree, pmix or auto"},
    {"TETHER_POLL_US", "-1", "TETHER_POLL_US=-1 is out of range [0, 1000000]"},
    // The default named is the variable's own (it said "the default, 0 ms").
    {"TETHER_TIMEOUT_MS", "-5",
     "TETHER_TIMEOUT_MS='-5' is negative: give milliseconds (0 or unset: the default, 300000 ms)"},
    {"TETHER_HANDSHAKE_TIMEOUT_MS", "-1",
     "TETHER_HANDSHAKE_TIMEOUT_MS='-1' is negative: give milliseconds (0 or unset: the default, 10000 ms)"},
};

std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
    return e.what();
  }
  return "(no error)";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("a bad TETHER_* variable is refused when the constructor starts, naming it and its value",
          "[launch][settings]") {
  for (const auto& bad : kBad) {
    EnvGuard env;
    env.set(bad.name, bad.value);
    const std::string what = errorOf([] {
      TcpOptions o;
      o.timeout = std::chrono::milliseconds(5000);
      TcpBootstrap b(0, 1, TcpBootstrap::createUniqueId("127.0.0.1:0"), o);
    });
    INFO(what);
    CHECK(what == std::string("rank 0: ") + bad.says);
  }
}

TEST_CASE("a bad TETHER_* variable is refused when fromEnvironment starts, before the launch is read",
          "[launch][settings]") {
  for (const auto& bad : kBad) {
    // No rank and no root: only the variable can be the error.
    EnvGuard env({{bad.name, bad.value}});
    const std::string what = errorOf([] { (void)TcpBootstrap::fromEnvironment(); });
    INFO(what);
    CHECK(what == std::string("fromEnvironment: ") + bad.says);
  }
}

TEST_CASE("a bad TETHER_* variable makes the C ABI's init fail with its name", "[launch][settings]") {
  EnvGuard env({{"TETHER_KEEPALIVE_COUNT", "0"}});
  tether_unique_id_t id;
  REQUIRE(tether_unique_id_create_at("127.0.0.1:0", &id) == TETHER_SUCCESS);
  tether_comm_t* comm = nullptr;
  CHECK(tether_init(0, 1, &id, nullptr, &comm) == TETHER_ERR_INVALID_ARGUMENT);
  CHECK(comm == nullptr);
  CHECK(contains(tether_last_error(), "TETHER_KEEPALIVE_COUNT=0 is out of range [1, 127]"));
}

TEST_CASE("good values of every table variable pass validation", "[launch][settings]") {
  EnvGuard env({{"TETHER_RENDEZVOUS_TREE_RADIX", "2"},
                {"TETHER_ALGO_TREE_RADIX", "0"},
                {"TETHER_DEBUG", "info"},
                {"TETHER_ALGO_ALLGATHER", "ring"},
                {"TETHER_TIMEOUT_MS", "0"},
                {"TETHER_IB_TIMEOUT", "31"}});
  CHECK_NOTHROW(settings::validateAll(""));
  env.set("TETHER_ALGO_TREE_RADIX", "1");
  CHECK(errorOf([] { settings::validateAll(""); }) == "TETHER_ALGO_TREE_RADIX=1 is out of range (0 or [2, 1048576])");
  env.set("TETHER_ALGO_TREE_RADIX", "0");
  env.set("TETHER_IB_TIMEOUT", "32");
  CHECK(errorOf([] { settings::validateAll(""); }) == "TETHER_IB_TIMEOUT=32 is out of range [1, 31]");
}

TEST_CASE("the two radices' old names still work, with one warning naming the new name", "[launch][settings]") {
  std::vector<std::string> warnings;
  setLogHandler([&](LogLevel level, const std::string& line) {
    if (level == LogLevel::Warn && contains(line, "is renamed")) warnings.push_back(line);
  });
  EnvGuard env({{"TETHER_RENDEZVOUS_RADIX", "3"}, {"TETHER_TREE_RADIX", "1"}});
  CHECK(settings::integer("TETHER_RENDEZVOUS_TREE_RADIX") == 3);
  // A bad value is named under the name it was given.
  CHECK(errorOf([] { settings::validateAll(""); }) == "TETHER_TREE_RADIX=1 is out of range (0 or [2, 1048576])");
  CHECK(errorOf([] { settings::validateAll(""); }) == "TETHER_TREE_RADIX=1 is out of range (0 or [2, 1048576])");
  // The new name wins over the old one.
  env.set("TETHER_ALGO_TREE_RADIX", "4");
  CHECK_NOTHROW(settings::validateAll(""));
  setLogHandler(nullptr);
  REQUIRE(warnings.size() == 2);  // once per old name, however often it is read
  CHECK(contains(warnings[0], "TETHER_RENDEZVOUS_RADIX is renamed TETHER_RENDEZVOUS_TREE_RADIX"));
  CHECK(contains(warnings[1], "TETHER_TREE_RADIX is renamed TETHER_ALGO_TREE_RADIX"));
}

TEST_CASE("a bootstrap's limits in TcpOptions override their variable; a bad one is refused naming the field",
          "[launch][settings]") {
  EnvGuard env({{"TETHER_MAX_PAYLOAD_BYTES", "1048576"}});
  auto start = [](TcpOptions o) {
    o.timeout = std::chrono::milliseconds(20000);
    TcpBootstrap b(0, 1, TcpBootstrap::createUniqueId("127.0.0.1:0"), o);
    std::vector<unsigned char> big(70000);
    b.send(big.data(), big.size(), 0, 0);  // over the option's limit, under the variable's
  };
  TcpOptions small;
  small.maxPayloadBytes = 65536;
  CHECK(contains(errorOf([&] { start(small); }), "70000 bytes is more than TETHER_MAX_PAYLOAD_BYTES=65536"));
  TcpOptions bad;
  bad.maxLinks = -1;
  CHECK(errorOf([&] { start(bad); }) ==
        "rank 0: TcpOptions::maxLinks=-1 is out of range [1, 1048576] (0: TETHER_MAX_LINKS)");
  TcpOptions count;
  count.keepaliveCount = 128;
  CHECK(errorOf([&] { start(count); }) ==
        "rank 0: TcpOptions::keepaliveCount=128 is out of range [1, 127] (0: TETHER_KEEPALIVE_COUNT)");
  TcpOptions handshake;
  handshake.handshakeTimeout = std::chrono::milliseconds(-1);
  CHECK(contains(errorOf([&] { start(handshake); }), "TcpOptions::handshakeTimeout is negative"));
}

TEST_CASE("the configuration is read and checked once: later changes of the environment do not reach it",
          "[launch][settings]") {
  EnvGuard env({{"TETHER_ROOT", "10.0.0.1:29500"}, {"TETHER_HANDSHAKE_TIMEOUT_MS", "2500"}});
  const auto values = settings::Values::read("");
  env.set("TETHER_ROOT", "10.0.0.2:29500");
  env.set("TETHER_HANDSHAKE_TIMEOUT_MS", "-1");
  CHECK(values.text("TETHER_ROOT") == std::optional<std::string>("10.0.0.1:29500"));
  CHECK(values.milliseconds("TETHER_HANDSHAKE_TIMEOUT_MS", std::chrono::milliseconds(10000)).count() == 2500);
  CHECK(values.integer("TETHER_MAX_LINKS") == 64);  // unset: the table's default
  CHECK_FALSE(values.text("TETHER_UID"));
  CHECK(errorOf([] { (void)settings::Values::read("rank 1: "); }).find("rank 1: TETHER_HANDSHAKE_TIMEOUT_MS='-1'") ==
        0);
}

// Before, fromEnvironment checked the variables, then the constructor and the
// world read them again: rank 1, waiting for rank 0's TETHER_UID_FILE, failed
// on a TETHER_RENDEZVOUS set meanwhile ("rank 1: TETHER_RENDEZVOUS='star' is
// not one of ...").
TEST_CASE("a launch reads the environment once: a variable changed while a rank waits for TETHER_UID_FILE is unseen",
          "[launch][settings]") {
  using namespace std::chrono_literals;
  const auto tag = std::to_string(::getpid());
  const auto file = std::filesystem::temp_directory_path() / ("tether-read-once-" + tag);
  std::filesystem::remove(file);
  auto results = test::runRanks(
      2,
      [&](int rank, const UniqueId&) {
        EnvGuard env;
        env.set("TETHER_RANK", std::to_string(rank));
        env.set("TETHER_NRANKS", "2");
        env.set("TETHER_UID_FILE", file.string());
        env.set("TETHER_JOB_ID", "read-once-" + tag);
        env.set("TETHER_TIMEOUT_MS", "20000");
        env.set("TETHER_SOCKET_IFNAME", "=lo");  // root on loopback
        env.set("TETHER_RENDEZVOUS", "root");
        std::thread change;
        if (rank == 0) {
          std::this_thread::sleep_for(2s);  // rank 1 waits for the file meanwhile
        } else {
          change = std::thread([] {
            std::this_thread::sleep_for(500ms);  // rank 1 has read its configuration, and waits
            ::setenv("TETHER_RENDEZVOUS", "star", 1);
            ::setenv("TETHER_KEEPALIVE_COUNT", "0", 1);
          });
        }
        std::unique_ptr<TcpBootstrap> b;
        try {
          b = TcpBootstrap::fromEnvironment();
        } catch (...) {
          if (change.joinable()) change.join();
          throw;
        }
        if (change.joinable()) change.join();
        int v[2] = {-1, -1};
        v[rank] = rank + 100;
        b->allgather(v, sizeof(int));
        test::expect(v[0] == 100 && v[1] == 101, "all-gathered blocks");
        b->barrier();
      },
      60s);
  std::filesystem::remove(file);
  for (const auto& r : results) {
    INFO("rank " << r.rank << ": " << r.output);
    CHECK(r.exitCode == 0);
  }
}

// docs/configuration.md: a table with the columns "variable | type | range |
// default | meaning" under a heading whose first word is the tier.
TEST_CASE("docs/configuration.md lists every variable of the table with its tier, type, range and default",
          "[launch][settings][docs]") {
  std::ifstream in(TETHER_DOCS_DIR "/configuration.md");
  REQUIRE(in.good());
  struct Row {
    std::string tier, type, range, fallback;
  };
  std::map<std::string, Row> docs;
  std::string line, tier;
  bool inTable = false;
  auto cells = [](const std::string& row) {
    std::vector<std::string> out;
    std::string cell;
    for (std::size_t i = 1; i < row.size(); ++i) {
      if (row[i] == '|' && row[i - 1] != '\\') {
        out.push_back(std::regex_replace(cell, std::regex("^\\s+|\\s+$|`|\\\\"), ""));
        cell.clear();
      } else {
        cell += row[i];
      }
    }
    return out;
  };
  while (std::getline(in, line)) {
    if (line.rfind("#", 0) == 0) {
      std::smatch m;
      std::regex_search(line, m, std::regex("^#+\\s+([A-Za-z]+)"));
      tier = m.size() > 1 ? m[1].str() : "";
      for (auto& c : tier) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      inTable = false;
      continue;
    }
    if (line.rfind("|", 0) != 0) {
      inTable = false;
      continue;
    }
    auto c = cells(line);
    if (c.size() >= 5 && c[0] == "variable" && c[1] == "type" && c[2] == "range" && c[3] == "default") {
      inTable = true;
      continue;
    }
    if (!inTable || c.size() < 5 || c[0].rfind("---", 0) == 0) continue;
    INFO(line);
    CHECK(docs.count(c[0]) == 0);
    docs[c[0]] = Row{tier, c[1], c[2], c[3]};
  }
  for (const auto& v : settings::all()) {
    INFO(v.name);
    REQUIRE(docs.count(v.name) == 1);
    const Row& d = docs[v.name];
    CHECK(d.tier == settings::tierName(v.tier));
    CHECK(d.type == settings::typeName(v.type));
    CHECK(d.range == settings::rangeText(v));
    CHECK(d.fallback == v.fallback);
  }
  for (const auto& [name, row] : docs) {
    INFO(name << " is in docs/configuration.md's tables but not in lib/base/settings.cpp");
    CHECK_NOTHROW(settings::find(name));
  }
}
