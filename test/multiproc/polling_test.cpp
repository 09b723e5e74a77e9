// Polling before sleeping (TETHER_POLL_US, lib/core/driver.hpp): a blocking
// call where this host has a core per rank polls its event loop briefly
// before it sleeps, and nothing polls between calls: an idle rank uses no CPU.
#include <sys/resource.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "multiproc.hpp"

using namespace tether;
using test::expect;

namespace {

// This process's user + system CPU time so far.
std::chrono::microseconds cpuTime() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto us = [](const timeval& t) { return std::chrono::seconds(t.tv_sec) + std::chrono::microseconds(t.tv_usec); };
  return std::chrono::duration_cast<std::chrono::microseconds>(us(u.ru_utime) + us(u.ru_stime));
}

}  // namespace

TEST_CASE("an idle rank uses no CPU between blocking calls, even with a long poll before each sleep",
          "[multiproc][cpu]") {
  // 1 ms of polling per wait: a poll left running after a call, or one on the
  // background thread, would spend most of the idle second below.
  ::setenv("TETHER_POLL_US", "1000", 1);
  auto res = test::runRanks(2, [](int rank, const UniqueId& id) {
    TcpOptions o;
    o.timeout = std::chrono::milliseconds(30000);
    TcpBootstrap b(rank, 2, id, o);
    int v = 0;
    for (int i = 0; i < 200; ++i) {  // ping-pong: every receive polls first
      if (rank == 0) {
        b.send(&v, sizeof v, 1, 0);
        b.recv(&v, sizeof v, 1, 0);
      } else {
        b.recv(&v, sizeof v, 0, 0);
        ++v;
        b.send(&v, sizeof v, 0, 0);
      }
    }
    if (rank == 0) expect(v == 200, "the ping-pong's count");
    b.barrier();
    const auto before = cpuTime();
    std::this_thread::sleep_for(std::chrono::seconds(1));  // idle: no call in flight
    const auto spent = cpuTime() - before;
    // A poll would cost close to 1 s; the background thread's rechecks a few ms.
    expect(spent < std::chrono::milliseconds(100),
           "rank " + std::to_string(rank) + " used " + std::to_string(spent.count()) + " us of CPU while idle for 1 s");
    b.barrier();
  });
  ::unsetenv("TETHER_POLL_US");
  INFO(test::summary(res));
  REQUIRE(test::allOk(res));
}
