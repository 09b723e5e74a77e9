// TETHER_UID_FILE across runs: a file left by an earlier run (or by another
// job sharing the path) must not send fast ranks to a dead root; rank 0
// removes its file once every rank has joined.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
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

TEST_CASE("a rank waiting for another job's TETHER_UID_FILE says so at its deadline", "[uidfile]") {
  TempDir dir;
  auto file = dir.path / "uid";
  writeFile(file, deadRootId() + "\njob TETHER_JOB_ID=old\n");
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
    CHECK(std::string(e.what()).find("TETHER_JOB_ID=old") != std::string::npos);
    CHECK(std::string(e.what()).find("TETHER_JOB_ID=new") != std::string::npos);
  }
}
