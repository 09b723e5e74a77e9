// A launcher that makes the id with createUniqueId() and fork+execs its ranks
// (rank 0 too) without calling forgetUniqueId: the exec'd rank 0 cannot
// inherit the reserved socket, and must still listen on the id's port
// (issue 16, item 8: it failed with "cannot listen ... Address already in use").
// The ranks are test/multiproc/launch_env_child (TETHER_TEST_LAUNCH_CHILD).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "env_guard.hpp"
#include "tether/tether.hpp"

using namespace tether;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("a launcher that fork+execs its ranks after createUniqueId() needs no forgetUniqueId", "[launch][exec]") {
  const char* child = std::getenv("TETHER_TEST_LAUNCH_CHILD");
  if (!child) FAIL("TETHER_TEST_LAUNCH_CHILD is not set (the path of test/multiproc/launch_env_child)");
  test::EnvGuard env;
  char tmpl[] = "/tmp/tether-exec-test-XXXXXX";
  REQUIRE(::mkdtemp(tmpl));
  const fs::path dir = tmpl;
  constexpr int kRanks = 3;
  for (int round = 0; round < 3; ++round) {
    INFO("round " << round);
    const UniqueId id = TcpBootstrap::createUniqueId("127.0.0.1:0");  // kept: the launcher holds its port
    std::vector<pid_t> pids;
    for (int r = 0; r < kRanks; ++r) {
      pid_t pid = ::fork();
      REQUIRE(pid >= 0);
      if (pid == 0) {
        ::setenv("TETHER_UID", id.toString().c_str(), 1);
        ::setenv("TETHER_RANK", std::to_string(r).c_str(), 1);
        ::setenv("TETHER_NRANKS", std::to_string(kRanks).c_str(), 1);
        ::setenv("TETHER_TIMEOUT_MS", "20000", 1);
        int out = ::open((dir / ("rank" + std::to_string(r))).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        ::dup2(out, 1);
        ::dup2(out, 2);
        ::execl(child, child, static_cast<char*>(nullptr));
        ::_exit(127);
      }
      pids.push_back(pid);
    }
    auto deadline = std::chrono::steady_clock::now() + 60s;
    for (int r = 0; r < kRanks; ++r) {
      int status = 0;
      while (::waitpid(pids[r], &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
          ::kill(pids[r], SIGKILL);
          ::waitpid(pids[r], &status, 0);
          break;
        }
        std::this_thread::sleep_for(10ms);
      }
      INFO("rank " << r << ": " << slurp(dir / ("rank" + std::to_string(r))));
      CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
    }
    TcpBootstrap::forgetUniqueId(id);
  }
  fs::remove_all(dir);
}
