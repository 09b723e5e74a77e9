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
#include <functional>
#include <map>
#include <regex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/settings.hpp"
#include "env_guard.hpp"
#include "multiproc.hpp"
#include "tether/detail/coll/settings.hpp"
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
    {"TETHER_LIVENESS_S", "0", "TETHER_LIVENESS_S=0 is out of range [4, 32767]"},
    {"TETHER_MAX_PAYLOAD_BYTES", "0", "TETHER_MAX_PAYLOAD_BYTES=0 is out of range [65536, 1099511627776]"},
    {"TETHER_MAX_LINKS", "99999999999999999999", "TETHER_MAX_LINKS=99999999999999999999 is out of range [1, 1048576]"},
    {"TETHER_LIVENESS_S", "ten", "TETHER_LIVENESS_S='ten' is not an integer"},
    {"TETHER_RENDEZVOUS", "star", "TETHER_RENDEZVOUS='star' is not one of root, tree, pmix or auto"},
    // The default named is the variable's own (it said "the default, 0 ms").
    {"TETHER_TIMEOUT_MS", "-5",
     "TETHER_TIMEOUT_MS='-5' is negative: give milliseconds (0 or unset: the default, 300000 ms)"},
    {"TETHER_HANDSHAKE_TIMEOUT_MS", "-1",
     "TETHER_HANDSHAKE_TIMEOUT_MS='-1' is negative: give milliseconds (0 or unset: the default, 10000 ms)"},
    // Text in the table, checked by the coll layer when the bootstrap starts.
    {"TETHER_ALGO", "allgather=fastest",
     "TETHER_ALGO='allgather=fastest': allgather=fastest is not one of auto, ring, tree, leaders, linear, bruck"},
    {"TETHER_ALGO", "chunk_bytes=10",
     "TETHER_ALGO='chunk_bytes=10': chunk_bytes=10 is out of range [4096, 1073741824]"},
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
  EnvGuard env({{"TETHER_LIVENESS_S", "0"}});
  tether_unique_id_t id;
  REQUIRE(tether_unique_id_create_at("127.0.0.1:0", &id) == TETHER_SUCCESS);
  tether_comm_t* comm = nullptr;
  CHECK(tether_init(0, 1, &id, nullptr, &comm) == TETHER_ERR_INVALID_ARGUMENT);
  CHECK(comm == nullptr);
  CHECK(contains(tether_last_error(), "TETHER_LIVENESS_S=0 is out of range [4, 32767]"));
}

TEST_CASE("good values of every table variable pass validation", "[launch][settings]") {
  EnvGuard env({{"TETHER_LIVENESS_S", "4"},
                {"TETHER_DEBUG", "info"},
                {"TETHER_ALGO", "allgather=ring,tree_radix=0"},
                {"TETHER_TIMEOUT_MS", "0"},
                {"TETHER_IB_QP", "timeout=31"}});
  CHECK_NOTHROW(settings::validateAll(""));
  env.set("TETHER_LIVENESS_S", "32768");
  CHECK(errorOf([] { settings::validateAll(""); }) == "TETHER_LIVENESS_S=32768 is out of range [4, 32767]");
}

// Issue 24: 43 variables and 2 former names before, NCCL's bootstrap reads
// about 16. The base layer no longer includes the coll layer's table (the
// `layers` test fails an upward include).
TEST_CASE("the table holds at most 25 variables, and none of the dropped or renamed ones", "[launch][settings]") {
  CHECK(settings::all().size() <= 25);
  for (const char* gone : {"TETHER_MAX_DIALS",
                           "TETHER_HOST_GROUP_MAX",
                           "TETHER_POLL_US",
                           "TETHER_KEEPALIVE_IDLE_S",
                           "TETHER_KEEPALIVE_INTERVAL_S",
                           "TETHER_KEEPALIVE_COUNT",
                           "TETHER_ALGO_ALLGATHER",
                           "TETHER_ALGO_ALLTOALL",
                           "TETHER_ALGO_BROADCAST",
                           "TETHER_ALGO_BARRIER",
                           "TETHER_ALGO_TREE_RADIX",
                           "TETHER_TREE_RADIX",
                           "TETHER_RENDEZVOUS_TREE_RADIX",
                           "TETHER_RENDEZVOUS_RADIX",
                           "TETHER_ALGO_LARGE_BYTES",
                           "TETHER_PIPELINE_CHUNK_BYTES",
                           "TETHER_IB_TIMEOUT",
                           "TETHER_IB_RETRY_CNT",
                           "TETHER_IB_RNR_RETRY",
                           "TETHER_IB_MIN_RNR_TIMER",
                           "TETHER_IB_SL",
                           "TETHER_IB_TC",
                           "TETHER_IB_RD_ATOMIC"}) {
    INFO(gone);
    CHECK_THROWS_AS(settings::find(gone), std::out_of_range);
  }
}

TEST_CASE("a dropped variable that is still set is not read, and one WARN names its replacement",
          "[launch][settings]") {
  std::vector<std::string> warnings;
  setLogHandler([&](LogLevel level, const std::string& line) {
    if (level == LogLevel::Warn && contains(line, "no longer read")) warnings.push_back(line);
  });
  EnvGuard env({{"TETHER_IB_SL", "99"}, {"TETHER_MAX_DIALS", "junk"}});
  CHECK_NOTHROW(settings::validateAll(""));  // not checked: not read
  CHECK_NOTHROW(settings::validateAll(""));
  setLogHandler(nullptr);
  REQUIRE(warnings.size() == 2);  // once per name, however often the configuration is read
  CHECK(contains(warnings[0], "TETHER_MAX_DIALS is no longer read (issue 24): use TcpOptions::maxDials"));
  CHECK(contains(warnings[1], "TETHER_IB_SL is no longer read (issue 24): use TETHER_IB_QP=sl=..."));
}

TEST_CASE("TETHER_LIVENESS_S gives the keepalive's idle time, interval and count, which add up to it",
          "[launch][settings]") {
  const auto byDefault = settings::keepaliveFor(std::stoll(settings::find("TETHER_LIVENESS_S").fallback));
  CHECK(byDefault.idleS == 10);  // the three knobs' old defaults
  CHECK(byDefault.intervalS == 2);
  CHECK(byDefault.count == 3);
  for (std::int64_t bound : {settings::kMinLivenessS, std::int64_t{5}, std::int64_t{60}, settings::kMaxLivenessS}) {
    INFO(bound);
    const auto k = settings::keepaliveFor(bound);
    CHECK(k.idleS >= 1);
    CHECK(k.idleS <= 32767);
    CHECK(k.intervalS >= 1);
    CHECK(k.idleS + k.intervalS * k.count == bound);
  }
}

TEST_CASE("TETHER_ALGO forces algorithms and tunes them by key; a bad item is refused naming the variable",
          "[launch][settings]") {
  namespace dc = detail::coll;
  const dc::Settings unset = dc::parseAlgo(nullptr);
  CHECK(std::string(unset.forcedFor(dc::Op::Allgather)).empty());
  CHECK(unset.tuning.radix == 0);  // the tree rows fit their radix to the size (dc::treeRadix)
  CHECK(unset.tuning.largeBytes == 65536);
  CHECK(unset.tuning.chunk == 262144);
  const dc::Settings s = dc::parseAlgo(
      "allgather=ring,alltoall=bruck,broadcast=pipeline,barrier=auto,tree_radix=3,large_bytes=8,"
      "chunk_bytes=4096");
  CHECK(std::string(s.forcedFor(dc::Op::Allgather)) == "ring");
  CHECK(std::string(s.forcedFor(dc::Op::Split)) == "ring");  // split's all-gather
  CHECK(std::string(s.forcedFor(dc::Op::Alltoall)) == "bruck");
  CHECK(std::string(s.forcedFor(dc::Op::Alltoallv)) == "bruck");
  CHECK(std::string(s.forcedFor(dc::Op::Broadcast)) == "pipeline");
  CHECK(std::string(s.forcedFor(dc::Op::Barrier)).empty());
  CHECK(s.tuning.radix == 3);
  CHECK(s.tuning.largeBytes == 8);
  CHECK(s.tuning.chunk == 4096);
  CHECK(dc::parseAlgo("tree_radix=0").tuning.radix == 0);  // 0: the default
  const std::vector<std::pair<const char*, const char*>> bad = {
      {"tree_radix=1", "TETHER_ALGO='tree_radix=1': tree_radix=1 is out of range (0 or [2, 1048576])"},
      {"large_bytes=big", "TETHER_ALGO='large_bytes=big': large_bytes='big' is not an integer"},
      {"barrier=ring", "TETHER_ALGO='barrier=ring': barrier=ring is not one of auto, tree, dissemination"},
      {"ring",
       "TETHER_ALGO='ring': 'ring' is not key=value (keys: allgather, alltoall, broadcast, barrier, "
       "tree_radix, large_bytes or chunk_bytes)"},
      {"allgather=ring,",
       "TETHER_ALGO='allgather=ring,': '' is not key=value (keys: allgather, alltoall, broadcast, "
       "barrier, tree_radix, large_bytes or chunk_bytes)"},
      {"gather=ring",
       "TETHER_ALGO='gather=ring': unknown key 'gather' (keys: allgather, alltoall, broadcast, "
       "barrier, tree_radix, large_bytes or chunk_bytes)"},
      {"allgather=ring,allgather=bruck", "TETHER_ALGO='allgather=ring,allgather=bruck': allgather is given twice"},
  };
  for (const auto& [text, says] : bad) {
    INFO(text);
    CHECK(errorOf([&] { (void)dc::parseAlgo(text); }) == says);
  }
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
  // Each field out of range, and what 0 would take.
  const std::vector<std::pair<std::function<void(TcpOptions&)>, const char*>> bad = {
      {[](TcpOptions& o) { o.maxLinks = -1; }, "maxLinks=-1 is out of range [1, 1048576] (0: TETHER_MAX_LINKS)"},
      {[](TcpOptions& o) { o.keepaliveCount = 128; },
       "keepaliveCount=128 is out of range [1, 127] (0: from TETHER_LIVENESS_S)"},
      {[](TcpOptions& o) { o.maxDials = -3; }, "maxDials=-3 is out of range [1, 1048576] (0: 32)"},
      {[](TcpOptions& o) { o.hostGroupMax = 1; }, "hostGroupMax=1 is out of range [2, 1024] (0: 64)"},
      {[](TcpOptions& o) { o.rendezvousTreeRadix = 1; }, "rendezvousTreeRadix=1 is out of range [2, 1048576] (0: 8)"},
      {[](TcpOptions& o) { o.pollUs = -2; }, "pollUs=-2 is out of range [-1, 1000000] (-1: 50; 0: off)"},
  };
  for (const auto& [set, says] : bad) {
    TcpOptions o;
    set(o);
    CHECK(errorOf([&] { start(o); }) == std::string("rank 0: TcpOptions::") + says);
  }
  TcpOptions handshake;
  handshake.handshakeTimeout = std::chrono::milliseconds(-1);
  CHECK(contains(errorOf([&] { start(handshake); }), "TcpOptions::handshakeTimeout is negative"));
}

TEST_CASE("the configuration is read and checked once: later changes of the environment do not reach it",
          "[launch][settings]") {
  EnvGuard env({{"TETHER_ROOT", "10.0.0.1:29500"}, {"TETHER_TIMEOUT_MS", "2500"}});
  const auto values = settings::Values::read("");
  env.set("TETHER_ROOT", "10.0.0.2:29500");
  env.set("TETHER_TIMEOUT_MS", "-1");
  CHECK(values.text("TETHER_ROOT") == std::optional<std::string>("10.0.0.1:29500"));
  CHECK(values.milliseconds("TETHER_TIMEOUT_MS", std::chrono::milliseconds(300000)).count() == 2500);
  CHECK(values.integer("TETHER_MAX_LINKS") == 64);  // unset: the table's default
  CHECK_FALSE(values.text("TETHER_UID"));
  CHECK(errorOf([] { (void)settings::Values::read("rank 1: "); }).find("rank 1: TETHER_TIMEOUT_MS='-1'") == 0);
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
            ::setenv("TETHER_LIVENESS_S", "0", 1);
            ::setenv("TETHER_ALGO", "allgather=fastest", 1);  // checked by coll, from the same reading
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
