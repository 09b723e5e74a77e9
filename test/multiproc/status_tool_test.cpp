// tether-status against a running job (docs/troubleshooting.md, "Where is
// every rank?"): 16 forked ranks loop over all-gathers with a long deadline;
// one is stopped (SIGSTOP) inside the loop, and the tool, asked before any
// rank's deadline, must name it as the rank the others wait for (and as not
// answering); then another is killed, and the tool must report it lost. A
// tool with another secret gets nothing but a clear error. The tool is the
// built command (TETHER_STATUS_TOOL), run as an operator would.
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "core/unique_id_layout.hpp"
#include "tether/log.hpp"
#include "multiproc.hpp"

using namespace tether;
using namespace std::chrono_literals;

namespace {

constexpr int kRanks = 16;
constexpr auto kCallTimeout = 120s;  // no rank's deadline passes while the test asks

// Shared between the test and its forked ranks.
struct Shared {
  std::atomic<int> joined{0};
  std::atomic<int> finish{0};  // 1: leave the loop and close
  std::atomic<int> pid[kRanks];
  std::atomic<long> iterations[kRanks];
  char uid[2 * UniqueId::kBytes + 1];
};

Shared* sharedBlock() {
  void* p = ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  REQUIRE(p != MAP_FAILED);
  return new (p) Shared();
}

struct ToolRun {
  int exitCode = -1;
  std::string out;
};

// The command, stdout captured (stderr to the test's log).
ToolRun runTool(const std::string& args) {
  const char* tool = std::getenv("TETHER_STATUS_TOOL");
  REQUIRE(tool);
  const std::string cmd = std::string(tool) + " " + args;
  ToolRun r;
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p);
  char buf[4096];
  std::size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, got);
  const int status = ::pclose(p);
  r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

nlohmann::json askJson(const std::string& uid) {
  auto r = runTool("--json --timeout-ms 2000 --uid " + uid);
  INFO("tether-status exit " << r.exitCode << ":\n" << r.out);
  REQUIRE((r.exitCode == 0 || r.exitCode == 1));
  return nlohmann::json::parse(r.out);
}

// The ranks' loop: all-gathers until told to finish or a call fails (a rank
// killed ends them all: the abort), then the bootstrap stays open until told.
void rankBody(Shared& sh, int rank, const UniqueId& id) {
  if (!std::getenv("TETHER_DEBUG")) setLogLevel(LogLevel::None);
  sh.pid[rank] = static_cast<int>(::getpid());
  if (rank == 0) std::snprintf(sh.uid, sizeof sh.uid, "%s", id.toString().c_str());
  TcpBootstrap b(rank, kRanks, id, TcpOptions{kCallTimeout, {}, {}, {}});
  sh.joined.fetch_add(1);
  std::vector<std::uint32_t> v(kRanks);
  try {
    while (!sh.finish.load()) {
      v[static_cast<std::size_t>(rank)] = static_cast<std::uint32_t>(rank);
      b.allgather(v.data(), sizeof(std::uint32_t));
      sh.iterations[rank].fetch_add(1);
    }
  } catch (const Error&) {
    // The killed rank's loss: expected once the test has killed it.
  }
  while (!sh.finish.load()) std::this_thread::sleep_for(10ms);
}

bool waitFor(const std::function<bool()>& ok, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!ok()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

// The ranks, forked from the test's only thread (TSan kills a child forked
// while another thread runs) and left running while the test asks; they
// leave when told (finish), which also continues a stopped rank.
class RunningJob {
 public:
  RunningJob(Shared& sh, int n, const std::function<void(int, const UniqueId&)>& body)
      : sh_(sh), started_(test::startRanks(n, body, 90s)) {}
  ~RunningJob() { finish(); }
  int stopped = -1;  // continued by finish()
  const std::vector<test::RankResult>& finish() {
    if (!collected_) {
      collected_ = true;
      sh_.finish = 1;
      if (stopped >= 0 && sh_.pid[stopped].load() > 0) ::kill(sh_.pid[stopped].load(), SIGCONT);
      results_ = test::collectRanks(std::move(started_));
    }
    return results_;
  }

 private:
  Shared& sh_;
  test::StartedRanks started_;
  bool collected_ = false;
  std::vector<test::RankResult> results_;
};

}  // namespace

TEST_CASE("tether-status names a stopped rank as the one the others wait for, and a killed rank as lost",
          "[multiproc][status]") {
  const int stopped = 5, killed = 11;
  Shared& sh = *sharedBlock();
  RunningJob job(sh, kRanks, [&](int r, const UniqueId& id) { rankBody(sh, r, id); });
  job.stopped = stopped;

  REQUIRE(waitFor([&] { return sh.joined.load() == kRanks; }, 60s));
  // Every rank has finished a few all-gathers: the loop runs everywhere.
  REQUIRE(waitFor(
      [&] {
        for (int r = 0; r < kRanks; ++r)
          if (sh.iterations[r].load() < 3) return false;
        return true;
      },
      30s));
  const std::string uid = sh.uid;
  REQUIRE(::kill(sh.pid[stopped].load(), SIGSTOP) == 0);

  // The others block within moments of the stop; ask until every rank that
  // answers is stuck behind it (a rank between two steps waits for nobody yet).
  nlohmann::json j;
  for (int attempt = 0; attempt < 6; ++attempt) {
    std::this_thread::sleep_for(200ms);
    j = askJson(uid);
    if (!j["behind"].empty() && j["behind"][0]["rank"] == stopped &&
        j["behind"][0]["waiters"] == kRanks - 1)
      break;
  }
  INFO(j.dump(1));
  CHECK(j["nranks"] == kRanks);
  CHECK(j["ranks"][stopped]["state"] == "no answer");
  CHECK(j["no_answer"] == nlohmann::json::array({stopped}));
  REQUIRE(!j["behind"].empty());
  CHECK(j["behind"][0]["rank"] == stopped);
  CHECK(j["behind"][0]["waiters"] == kRanks - 1);
  for (int r = 0; r < kRanks; ++r) {
    if (r == stopped) continue;
    CHECK(j["ranks"][r]["state"] == "alive");
    CHECK(j["ranks"][r]["in_call"] == true);
    CHECK(j["ranks"][r]["call"].get<std::string>().rfind("allgather#", 0) == 0);
  }

  REQUIRE(::kill(sh.pid[killed].load(), SIGKILL) == 0);
  nlohmann::json k;
  for (int attempt = 0; attempt < 6; ++attempt) {
    std::this_thread::sleep_for(200ms);
    k = askJson(uid);
    if (k["ranks"][killed]["state"] == "lost") break;
  }
  INFO(k.dump(1));
  CHECK(k["ranks"][killed]["state"] == "lost");
  CHECK(k["lost"] == nlohmann::json::array({killed}));
  CHECK(k["ranks"][stopped]["state"] == "no answer");
  CHECK(k["ranks"][0]["state"] == "alive");

  // Continued, the stopped rank fails its call like the others (the abort
  // that followed the kill) and every rank but the killed one closes cleanly.
  const auto& results = job.finish();
  INFO(test::summary(results));
  for (const auto& r : results) CHECK((r.rank == killed ? r.signal == SIGKILL : r.exitCode == 0));
}

TEST_CASE("tether-status with another secret gets no answer, only an error saying so", "[multiproc][status]") {
  constexpr int n = 3;
  Shared& sh = *sharedBlock();
  RunningJob job(sh, n, [&](int rank, const UniqueId& id) {
    if (!std::getenv("TETHER_DEBUG")) setLogLevel(LogLevel::None);
    if (rank == 0) std::snprintf(sh.uid, sizeof sh.uid, "%s", id.toString().c_str());
    TcpBootstrap b(rank, n, id, TcpOptions{kCallTimeout, {}, {}, {}});
    sh.joined.fetch_add(1);
    while (!sh.finish.load()) std::this_thread::sleep_for(10ms);
  });
  REQUIRE(waitFor([&] { return sh.joined.load() == n; }, 60s));
  const std::string uid = sh.uid;

  // The right secret: every rank answers, in no call.
  auto good = runTool("--json --uid " + uid);
  INFO(good.out);
  REQUIRE(good.exitCode == 0);
  auto j = nlohmann::json::parse(good.out);
  CHECK(j["counts"]["alive"] == n);
  for (int r = 0; r < n; ++r) CHECK(j["ranks"][r]["in_call"] == false);

  // Same root, another secret.
  auto f = uid::parse(UniqueId::fromString(uid));
  f.secret[0] ^= 0x5a;
  auto bad = runTool("--json --uid " + uid::make(f).toString());
  INFO(bad.out);
  CHECK(bad.exitCode == 2);
  auto e = nlohmann::json::parse(bad.out);
  CHECK_FALSE(e.contains("ranks"));
  CHECK(e["error"].get<std::string>().find("rejected our proof of the secret") != std::string::npos);
}

// Asked while the world is still joining, rank 0 says so (the tool exits 2
// naming it) and joins afterwards unharmed. Before the answer was built as a
// named local, GCC 12 freed the reject's temporary twice here: rank 0 died
// with "double free detected" and the rendezvous failed.
TEST_CASE("tether-status asked while the world joins gets 'not joined', and the world then joins", "[multiproc][status]") {
  constexpr int n = 2;
  Shared& sh = *sharedBlock();
  RunningJob job(sh, n, [&](int rank, const UniqueId& id) {
    if (!std::getenv("TETHER_DEBUG")) setLogLevel(LogLevel::None);
    if (rank == 0) std::snprintf(sh.uid, sizeof sh.uid, "%s", id.toString().c_str());
    sh.pid[rank] = static_cast<int>(::getpid());
    while (rank == 1 && !sh.finish.load()) std::this_thread::sleep_for(10ms);  // rank 0 waits for it
    TcpBootstrap b(rank, n, id, TcpOptions{kCallTimeout, {}, {}, {}});
    b.barrier();
  });
  REQUIRE(waitFor([&] { return sh.pid[0].load() > 0 && sh.uid[0] != 0; }, 30s));
  const std::string uid = sh.uid;
  ToolRun asked;
  for (int attempt = 0; attempt < 100; ++attempt) {  // until rank 0 listens
    asked = runTool("--json --timeout-ms 2000 --uid " + uid);
    if (asked.out.find("has not joined") != std::string::npos) break;
    std::this_thread::sleep_for(100ms);
  }
  INFO(asked.out);
  CHECK(asked.exitCode == 2);
  CHECK(asked.out.find("has not joined its world yet: the rendezvous has not finished here") != std::string::npos);
  const auto& results = job.finish();
  INFO(test::summary(results));
  CHECK(test::allOk(results));
}
