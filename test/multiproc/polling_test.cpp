// Polling before sleeping (TcpOptions::pollUs, lib/core/driver.hpp): a blocking
// call where this host has a core per rank polls its event loop briefly
// before it sleeps, and nothing polls between calls: an idle rank uses no CPU;
// a test() loop sleeps once its tests stop making progress.
#include <sys/resource.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

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
  auto res = test::runRanks(2, [](int rank, const UniqueId& id) {
    TcpOptions o;
    o.timeout = std::chrono::milliseconds(30000);
    o.pollUs = 1000;
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
  INFO(test::summary(res));
  REQUIRE(test::allOk(res));
}

// A tight test() loop is a waiter (issue 23 item 8): once its tests stop
// making progress (past TcpOptions::pollUs, 50 us) each one sleeps in the kernel until
// a frame comes or a short bound passes (20-250 us), where it used to return
// at once (about 1 test per microsecond, a core spent). Rank 1 enters each
// all-gather 300 ms late; rank 0 tests in a loop, tightly or with a little
// work between (UCC's pattern), right after the barrier or after 20 ms (when
// the background thread holds the event loop and the test takes it over).
TEST_CASE("a test() loop waiting for a late peer sleeps between tests instead of spinning", "[multiproc][cpu]") {
  auto res = test::runRanks(2, [](int rank, const UniqueId& id) {
    TcpOptions o;
    o.timeout = std::chrono::milliseconds(30000);
    TcpBootstrap b(rank, 2, id, o);
    for (int round = 0; round < 4; ++round) {
      std::vector<int> all(2, -1);
      all[static_cast<std::size_t>(rank)] = rank + 10 * round;
      b.barrier();
      if (rank == 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        b.allgather(all.data(), sizeof(int));
        continue;
      }
      const bool work = round % 2 == 1;  // about 1 us of the caller's own work between tests
      if (round >= 2) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      const auto began = std::chrono::steady_clock::now();
      const auto cpuBefore = cpuTime();
      long tests = 0;
      Request r = b.iallgather(all.data(), sizeof(int));
      for (;;) {
        ++tests;
        if (r.test()) break;
        if (work) {
          const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(1);
          while (std::chrono::steady_clock::now() < until) {
          }
        }
      }
      const auto elapsed =
          std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - began);
      const auto spent = cpuTime() - cpuBefore;
      expect(all[0] == 10 * round && all[1] == 1 + 10 * round, "the all-gather's data");
      const std::string what = "round " + std::to_string(round) + ": " + std::to_string(tests) + " tests and " +
                               std::to_string(spent.count()) + " us of CPU in " + std::to_string(elapsed.count()) +
                               " us";
      // Sleeping tests: at most one per 20 us once past the 50 us poll (most
      // sleep 250 us); a spinning loop makes one or more per microsecond.
      expect(tests < 1000 + elapsed.count() / 50, what);
      expect(spent < elapsed / 2, what);
    }
  });
  INFO(test::summary(res));
  REQUIRE(test::allOk(res));
}
