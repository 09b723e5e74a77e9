// A root given by a name that does not resolve yet (a Kubernetes headless
// service right after the pods start): the ranks wait for it until the
// deadline, then fail naming the rank, the name and the resolver's answer.
// Each case runs in a forked child with its own mount namespace, in which
// /etc/hosts and /etc/resolv.conf are files of the test's (glibc reads
// /etc/hosts again on every lookup; the name server is a closed local port,
// so an unknown name fails at once). Without root the cases are skipped.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "free_port.hpp"
#include "multiproc.hpp"
#include "tether/tether.hpp"

using namespace tether;

namespace {

constexpr int kSkipped = 77;

// Enters a private mount namespace whose /etc/hosts is `hosts` (written with
// `lines`) and whose /etc/resolv.conf names a local port nobody answers.
bool privateResolver(const std::string& hosts, const std::string& lines) {
  std::fflush(stdout);  // what Catch printed before the fork is the parent's
  if (::unshare(CLONE_NEWNS) != 0) return false;
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return false;
  const std::string resolv = hosts + ".resolv";
  std::ofstream(hosts) << lines;
  std::ofstream(resolv) << "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n";
  return ::mount(hosts.c_str(), "/etc/hosts", nullptr, MS_BIND, nullptr) == 0 &&
         ::mount(resolv.c_str(), "/etc/resolv.conf", nullptr, MS_BIND, nullptr) == 0;
}

std::string tempPath(const char* what) {
  return std::string("/tmp/tether-") + what + "-" + std::to_string(::getpid());
}

void setRank(int rank, int nranks, const std::string& root, const char* timeoutMs) {
  ::setenv("TETHER_RANK", std::to_string(rank).c_str(), 1);
  ::setenv("TETHER_NRANKS", std::to_string(nranks).c_str(), 1);
  ::setenv("TETHER_ROOT", root.c_str(), 1);
  ::setenv("TETHER_TIMEOUT_MS", timeoutMs, 1);
}

}  // namespace

TEST_CASE("a root name that never resolves fails at the deadline naming the rank, the name and the resolver's answer",
          "[launch]") {
  const std::string hosts = tempPath("hosts-never");
  std::string text;
  const int code = test::inChild(
      [&] {
        if (!privateResolver(hosts, "127.0.0.1 localhost\n")) return kSkipped;
        setRank(1, 2, "not-yet-there.example.invalid:29500", "1500");
        const auto began = std::chrono::steady_clock::now();
        try {
          auto b = TcpBootstrap::fromEnvironment();
          std::printf("started\n");
        } catch (const Error& e) {
          const auto ms =
              std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - began).count();
          std::printf("code=%s rank=%d elapsed_ms=%lld what=%s\n", toString(e.code()), e.rank(),
                      static_cast<long long>(ms), e.what());
        }
        return 0;
      },
      text);
  std::remove(hosts.c_str());
  std::remove((hosts + ".resolv").c_str());
  if (code == kSkipped) {
    WARN("skipped: no private mount namespace (needs root)");
    return;
  }
  INFO(text);
  REQUIRE(code == 0);
  CHECK(text.find("code=Timeout rank=1 ") != std::string::npos);
  CHECK(text.find("not-yet-there.example.invalid") != std::string::npos);
  CHECK(text.find("did not resolve within 1500 ms") != std::string::npos);
  CHECK(text.find("resolver's last answer: cannot resolve host") != std::string::npos);
  const auto at = text.find("elapsed_ms=");
  REQUIRE(at != std::string::npos);
  const long long ms = std::atoll(text.c_str() + at + 11);
  CHECK(ms >= 1500);
  CHECK(ms < 1500 + 3000);  // did not hang past the deadline
}

TEST_CASE("ranks whose root name starts resolving after 2 s start once it does", "[launch]") {
  const std::string hosts = tempPath("hosts-late");
  std::string text;
  const int code = test::inChild(
      [&] {
        if (!privateResolver(hosts, "127.0.0.1 localhost\n")) return kSkipped;
        const test::ReservedLoopbackPort reserved;
        const std::string root = "tether-late-root:" + std::to_string(reserved.port());
        pid_t ranks[2];
        for (int r = 0; r < 2; ++r) {
          std::fflush(stdout);
          ranks[r] = ::fork();
          if (ranks[r] == 0) {
            setRank(r, 2, root, "20000");
            try {
              auto b = TcpBootstrap::fromEnvironment();
              int mine = 100 + r, all[2] = {0, 0};
              all[r] = mine;
              b->allgather(all, sizeof(int));
              b->barrier();  // neither leaves while the other still needs it
              b.reset();
              std::printf("rank %d: ok %d %d\n", r, all[0], all[1]);
              std::fflush(stdout);
              ::_exit(all[0] == 100 && all[1] == 101 ? 0 : 2);
            } catch (const std::exception& e) {
              std::printf("rank %d: %s\n", r, e.what());
              std::fflush(stdout);
              ::_exit(3);
            }
          }
        }
        std::this_thread::sleep_for(std::chrono::seconds(2));
        {  // in place: the bind mount holds this file's inode
          std::ofstream late(hosts, std::ios::trunc);
          late << "127.0.0.1 localhost\n127.0.0.1 tether-late-root\n";
        }
        int failed = 0;
        for (pid_t p : ranks) {
          int status = 0;
          ::waitpid(p, &status, 0);
          failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        }
        return failed == 0 ? 0 : 4;
      },
      text);
  std::remove(hosts.c_str());
  std::remove((hosts + ".resolv").c_str());
  if (code == kSkipped) {
    WARN("skipped: no private mount namespace (needs root)");
    return;
  }
  INFO(text);
  CHECK(code == 0);
  CHECK(text.find("rank 0: ok 100 101") != std::string::npos);
  CHECK(text.find("rank 1: ok 100 101") != std::string::npos);
}
