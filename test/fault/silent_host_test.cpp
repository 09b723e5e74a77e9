// A host that goes silent (no FIN, no RST, no ACK): survivors must still fail
// with PeerLost (or Aborted naming it) within the keepalive bound,
// TETHER_LIVENESS_S (idle + interval x count seconds). Needs root: the test builds two private
// network namespaces joined by a veth pair (10.200.0.1 <-> 10.200.0.2),
// puts the victim rank on the far side, and takes its interface down.
// Nothing leaves the host. Skipped (exit 77) without the privileges.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>
#include <thread>

#include "fault_support.hpp"
#include "multiproc.hpp"

using namespace tether;
using namespace std::chrono_literals;

namespace {

bool sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0; }

// Exit code 0: passed; 77: skipped; anything else: failed (message on stdout).
int harness() {
  if (!std::getenv("TETHER_DEBUG")) setLogLevel(LogLevel::None);
  if (::unshare(CLONE_NEWNET) != 0) {
    std::printf("SKIP: unshare(CLONE_NEWNET) needs root\n");
    return 77;
  }
  // A process that only holds the far namespace.
  int ready[2];
  if (::pipe(ready) != 0) return 1;
  pid_t holder = ::fork();
  if (holder == 0) {
    if (::unshare(CLONE_NEWNET) != 0) ::_exit(1);
    (void)!::write(ready[1], "x", 1);
    for (;;) ::pause();
  }
  char c;
  if (::read(ready[0], &c, 1) != 1) return 1;
  std::string far = "nsenter --net=/proc/" + std::to_string(holder) + "/ns/net ";
  bool ok = sh("ip link set lo up") && sh("ip link add tva type veth peer name tvb netns " + std::to_string(holder)) &&
            sh("ip addr add 10.200.0.1/24 dev tva") && sh("ip link set tva up") && sh(far + "ip link set lo up") &&
            sh(far + "ip addr add 10.200.0.2/24 dev tvb") && sh(far + "ip link set tvb up");
  if (!ok) {
    ::kill(holder, SIGKILL);
    ::waitpid(holder, nullptr, 0);
    std::printf("SKIP: cannot build the veth pair (ip/nsenter missing or not permitted)\n");
    return 77;
  }

  // Keepalive bound for this test: the smallest, 4 s (1 + 1 x 3).
  ::setenv("TETHER_LIVENESS_S", "4", 1);
  const auto bound = 4s;
  const int n = 3, victim = 2;
  fault::SharedSlots slots(n + 1);  // slot n: survivors are done
  slots[n].code = 0;
  auto res = test::runRanks(
      n,
      [&](int rank, const UniqueId& id) {
        if (rank == victim) {
          int fd = ::open(("/proc/" + std::to_string(holder) + "/ns/net").c_str(), O_RDONLY);
          test::expect(fd >= 0 && ::setns(fd, CLONE_NEWNET) == 0, "enter the far namespace");
          ::close(fd);
        }
        TcpBootstrap b(rank, n, id, TcpOptions{20s, {}, {}, {}});
        b.barrier();  // every link the barrier uses is up
        if (rank == victim) {
          test::expect(sh("ip link set tvb down"), "take the far interface down");
          slots[victim].eventUs = fault::nowUs();
          while (slots[n].code.load() < n - 1) std::this_thread::sleep_for(10ms);
          ::_exit(0);  // its FIN cannot get out any more
        }
        while (slots[victim].eventUs.load() == 0) std::this_thread::sleep_for(1ms);
        try {
          for (;;) b.barrier();
        } catch (const Error& e) {
          slots[rank].eventUs = fault::nowUs();
          slots[n].code.fetch_add(1);
          bool named = (e.code() == ErrorCode::PeerLost && e.peer() == victim) ||
                       (e.code() == ErrorCode::Aborted &&
                        std::string(e.what()).find("lost rank " + std::to_string(victim)) != std::string::npos);
          test::expect(named, std::string("should name the silent rank: ") + e.what());
        }
      },
      30s, "10.200.0.1:0");
  ::kill(holder, SIGKILL);
  ::waitpid(holder, nullptr, 0);
  std::string failures;
  long worstMs = 0;
  for (int r = 0; r < n; ++r) {
    if (res[r].exitCode != 0) failures += test::summary({res[r]});
    if (r != victim && res[r].exitCode == 0)
      worstMs = std::max<long>(worstMs, (slots[r].eventUs.load() - slots[victim].eventUs.load()) / 1000);
  }
  std::printf("silent host: longest report after the link went silent: %ld ms (bound %lld s)\n", worstMs,
              static_cast<long long>(bound.count()));
  if (!failures.empty()) {
    std::printf("%s", failures.c_str());
    return 1;
  }
  if (worstMs > std::chrono::duration_cast<std::chrono::milliseconds>(bound + 2s).count()) {
    std::printf("slower than the keepalive bound\n");
    return 1;
  }
  return 0;
}

}  // namespace

TEST_CASE("a silent host is reported within the keepalive bound", "[fault][silent-host]") {
  std::string text;
  const int code = test::inChild(harness, text);  // the namespaces must not touch this process
  std::printf("%s", text.c_str());
  if (code == 77) {
    WARN(text);
    return;
  }
  INFO(text);
  CHECK(code == 0);  // 1 also when the child was killed
}
