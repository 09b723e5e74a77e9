// TETHER_UID_FILE across runs: a file left by an earlier run (or by another
// job sharing the path) must not send fast ranks to a dead root; rank 0
// removes its file once every rank has joined.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <chrono>
#include <fstream>
#include <string>
#include <utility>
#include <thread>
#include <vector>

#include "env_guard.hpp"
#include "multiproc.hpp"
#include "tether/tether.hpp"

using namespace tether;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/tether-uid-test-XXXXXX";
    REQUIRE(::mkdtemp(tmpl));
    path = tmpl;
  }
  ~TempDir() { fs::remove_all(path); }
  fs::path path;
};

// An id whose root nobody listens on (port 1 refuses at once).
std::string deadRootId() { return TcpBootstrap::uniqueIdFromRoot("127.0.0.1:1").toString(); }

void writeFile(const fs::path& p, const std::string& text) {
  std::ofstream out(p);
  out << text;
  REQUIRE(out.good());
}

// Runs `n` ranks through fromEnvironment() with TETHER_UID_FILE=`file` and the
// given job variables; rank 0 starts late, so the other ranks look at the
// file first. Each rank all-gathers and checks the result.
std::vector<test::RankResult> runJob(int n, const fs::path& file,
                                     const std::vector<std::pair<std::string, std::string>>& job) {
  return test::runRanks(
      n,
      [&](int rank, const UniqueId&) {
        test::EnvGuard env;
        for (const auto& [name, value] : job) env.set(name, value);
        env.set("TETHER_RANK", std::to_string(rank));
        env.set("TETHER_NRANKS", std::to_string(n));
        env.set("TETHER_UID_FILE", file.string());
        env.set("TETHER_TIMEOUT_MS", "5000");
        ::setenv("TETHER_SOCKET_IFNAME", "=lo", 1);  // root on loopback
        if (rank == 0) std::this_thread::sleep_for(300ms);
        auto b = TcpBootstrap::fromEnvironment();
        std::vector<int> v(static_cast<std::size_t>(n), -1);
        v[static_cast<std::size_t>(rank)] = rank + 100;
        b->allgather(v.data(), sizeof(int));
        for (int r = 0; r < n; ++r) test::expect(v[static_cast<std::size_t>(r)] == r + 100, "all-gathered block");
        b->barrier();
      },
      30s);
}

}  // namespace

TEST_CASE("a TETHER_UID_FILE of an earlier run or another job is not read by this job's fast ranks", "[uidfile]") {
  const std::pair<const char*, std::string> stale[] = {
      {"left by a crashed earlier run (no job id)", deadRootId() + "\n"},
      {"written for another job", deadRootId() + "\njob OMPI_MCA_ess_base_jobid=1111\n"},
  };
  const std::pair<std::string, std::string> jobs[] = {{"SLURM_JOB_ID", "4242"}, {"OMPI_MCA_ess_base_jobid", "2222"}};
  for (const auto& [why, text] : stale) {
    for (const auto& job : jobs) {
      INFO(why << "; this job: " << job.first << "=" << job.second);
      TempDir dir;
      auto file = dir.path / "uid";
      writeFile(file, text);
      auto res = runJob(3, file, {job});
      INFO(test::summary(res));
      CHECK(test::allOk(res));
    }
  }
}

TEST_CASE("rank 0 removes TETHER_UID_FILE once every rank has joined, and leaves no temporary file", "[uidfile]") {
  TempDir dir;
  auto file = dir.path / "uid";
  auto res = runJob(3, file, {{"TETHER_JOB_ID", "run-1"}});
  INFO(test::summary(res));
  REQUIRE(test::allOk(res));
  CHECK_FALSE(fs::exists(file));
  CHECK(fs::is_empty(dir.path));
  // The same path works again for the next run.
  res = runJob(2, file, {{"TETHER_JOB_ID", "run-2"}});
  INFO(test::summary(res));
  CHECK(test::allOk(res));
}

TEST_CASE("a rank waiting for its job's TETHER_UID_FILE names the file and the job at its deadline", "[uidfile]") {
  TempDir dir;
  auto file = dir.path / "uid";
  writeFile(file, deadRootId() + "\njob TETHER_JOB_ID=old\n");  // another job's, at the path itself
  test::EnvGuard env({{"TETHER_RANK", "1"},
                      {"TETHER_NRANKS", "2"},
                      {"TETHER_UID_FILE", file.string()},
                      {"TETHER_JOB_ID", "new"},
                      {"TETHER_TIMEOUT_MS", "600"}});
  try {
    TcpBootstrap::fromEnvironment();
    FAIL("a rank without its root started");
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(e.code() == ErrorCode::Timeout);
    CHECK(std::string(e.what()).find(file.string() + ".TETHER_JOB_ID_new") != std::string::npos);
    CHECK(std::string(e.what()).find("job TETHER_JOB_ID=new") != std::string::npos);
  }
}

TEST_CASE("two jobs sharing one TETHER_UID_FILE path with different TETHER_JOB_IDs both complete", "[uidfile]") {
  // On 064f117 one job's rank 1 missed its id (the other job had replaced the
  // file) in 3 of 6 trials and failed at its deadline: 10 trials.
  for (int trial = 0; trial < 10; ++trial) {
    INFO("trial " << trial);
    TempDir dir;
    auto file = dir.path / "uid";
    // Processes 0-1 are ranks 0-1 of job a, processes 2-3 those of job b.
    auto res = test::runRanks(
        4,
        [&](int process, const UniqueId&) {
          const int rank = process % 2;
          const std::string job = process < 2 ? "a" : "b";
          test::EnvGuard env({{"TETHER_RANK", std::to_string(rank)},
                              {"TETHER_NRANKS", "2"},
                              {"TETHER_UID_FILE", file.string()},
                              {"TETHER_JOB_ID", job},
                              {"TETHER_TIMEOUT_MS", "10000"}});
          ::setenv("TETHER_SOCKET_IFNAME", "=lo", 1);
          auto b = TcpBootstrap::fromEnvironment();
          int v[2] = {-1, -1};
          v[rank] = (job == "a" ? 100 : 200) + rank;
          b->allgather(v, sizeof(int));
          for (int r = 0; r < 2; ++r) test::expect(v[r] == (job == "a" ? 100 : 200) + r, "all-gathered block");
          b->barrier();
        },
        60s);
    INFO(test::summary(res));
    CHECK(test::allOk(res));
  }
}

namespace {

// fromEnvironment() as rank `rank` of job "j" with TETHER_UID_FILE=`file` and
// a 30 s deadline: the error it fails with, and how long that took.
std::pair<std::string, std::chrono::milliseconds> uidFileFailure(const fs::path& file, int rank) {
  test::EnvGuard env({{"TETHER_RANK", std::to_string(rank)},
                      {"TETHER_NRANKS", "2"},
                      {"TETHER_UID_FILE", file.string()},
                      {"TETHER_JOB_ID", "j"},
                      {"TETHER_TIMEOUT_MS", "30000"}});
  auto began = std::chrono::steady_clock::now();
  try {
    TcpBootstrap::fromEnvironment();
  } catch (const Error& e) {
    return {e.what(), std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - began)};
  }
  return {"(no error)", 0ms};
}

}  // namespace

TEST_CASE("a TETHER_UID_FILE that cannot hold an id fails fast with the real reason", "[uidfile]") {
  TempDir dir;
  auto file = dir.path / "uid";
  const fs::path ofJob = file.string() + ".TETHER_JOB_ID_j";  // the name job "j" uses
  std::string reason;
  SECTION("a directory") {
    for (const auto& p : {file, ofJob}) fs::create_directory(p);
    reason = "is a directory";
  }
  SECTION("garbage") {
    for (const auto& p : {file, ofJob}) writeFile(p, "hello world\n");
    reason = "does not hold a tether id";
  }
  SECTION("garbage after the id") {
    for (const auto& p : {file, ofJob}) writeFile(p, deadRootId() + "\njob TETHER_JOB_ID=j\nmore\n");
    reason = "holds more than an id";
  }
  SECTION("a path through a regular file") {
    writeFile(dir.path / "plain", "x");
    file = dir.path / "plain" / "uid";
    reason = "Not a directory";
  }
  SECTION("a file this user cannot read") {
    for (const auto& p : {file, ofJob}) {
      writeFile(p, deadRootId() + "\njob TETHER_JOB_ID=j\n");
      fs::permissions(p, fs::perms::none);
    }
    if (::geteuid() == 0) {
      // Root reads every file: the rank runs as nobody in a child instead.
      auto res = test::runRanks(1, [&](int, const UniqueId&) {
        test::expect(::setgid(65534) == 0 && ::setuid(65534) == 0, "setuid(nobody)");
        auto [what, took] = uidFileFailure(file, 1);
        test::expect(what.find("cannot be read: Permission denied") != std::string::npos && took < 10s,
                     what + " after " + std::to_string(took.count()) + " ms");
      });
      INFO(test::summary(res));
      CHECK(test::allOk(res));
      return;
    }
    reason = "Permission denied";
  }
  auto [what, took] = uidFileFailure(file, 1);
  INFO(what << " after " << took.count() << " ms");
  CHECK(what.find("TETHER_UID_FILE") != std::string::npos);
  CHECK(what.find(reason) != std::string::npos);
  CHECK(took < 10s);  // fast: not the 30 s deadline
}

TEST_CASE("rank 0 that cannot write its TETHER_UID_FILE says why", "[uidfile]") {
  TempDir dir;
  auto [what, took] = uidFileFailure(dir.path / "missing-dir" / "uid", 0);
  INFO(what);
  CHECK(what.find("cannot write TETHER_UID_FILE temporary") != std::string::npos);
  CHECK(what.find("No such file or directory") != std::string::npos);
}
