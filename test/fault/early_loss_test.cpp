// Failures on the paths a runtime takes right after init, with real
// processes (issue 23): a rank that dies before anyone has a link to it, a
// nonblocking request that is only ever tested, and a frozen peer. Each must
// end with a clear error naming the rank, within the deadline plus a second
// (here far less than the deadline: the deadline is long on purpose, so a
// call that waits for it is told apart from one that noticed the loss).
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>

#include "fault_support.hpp"
#include "multiproc.hpp"
#include "tether/tether.hpp"

using namespace tether;
using namespace std::chrono_literals;

namespace {

void quietChild() {
  if (!std::getenv("TETHER_DEBUG")) setLogLevel(LogLevel::None);
}

std::string describe(const Error& e) { return std::string("[") + toString(e.code()) + "] " + e.what(); }

// PeerLost naming `victim`, or Aborted whose reason names it.
bool namesLoss(const Error& e, int victim) {
  if (e.code() == ErrorCode::PeerLost) return e.peer() == victim;
  if (e.code() == ErrorCode::Aborted)
    return std::string(e.what()).find("lost rank " + std::to_string(victim)) != std::string::npos;
  return false;
}

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// 4 ranks; `victim` `_exit`s right after init while the others run `call`
// (a first all-gather, blocking or tested): each survivor must fail naming it
// within 5 s (the deadline is 20 s), `rounds` times.
void expectEarlyLossNamed(int victim, int rounds, const std::function<void(TcpBootstrap&)>& call) {
  const int n = 4;
  for (int round = 0; round < rounds; ++round) {
    INFO("round " << round);
    auto res = test::runRanks(
        n,
        [&](int rank, const UniqueId& id) {
          quietChild();
          TcpBootstrap b(rank, n, id, TcpOptions{20s, {}, {}, {}});
          if (rank == victim) ::_exit(0);
          const auto start = std::chrono::steady_clock::now();
          try {
            call(b);
          } catch (const Error& e) {
            test::expect(namesLoss(e, victim), "should name rank " + std::to_string(victim) + ", got " + describe(e));
            test::expect(secondsSince(start) < 5.0, "noticed only after " + std::to_string(secondsSince(start)) +
                                                        " s (deadline 20 s): " + describe(e));
            return;
          }
          throw std::runtime_error("all-gathers with a dead rank succeeded");
        },
        60s);
    INFO(test::summary(res));
    for (int r = 0; r < n; ++r)
      if (r != victim) CHECK(res[r].exitCode == 0);
  }
}

}  // namespace

TEST_CASE("a rank that exits right after init is PeerLost at once, before any link to it was opened",
          "[fault][early-loss]") {
  // The default rendezvous (host-local) leaves no rank-to-rank link open after
  // init: the first all-gather dials, and the victim's refusal is its loss.
  expectEarlyLossNamed(2, 4, [](TcpBootstrap& b) {
    std::vector<unsigned char> v(8 * b.size(), static_cast<unsigned char>(b.rank()));
    for (int i = 0; i < 3; ++i) b.allgather(v.data(), 8);
  });
}

TEST_CASE("a tested request with a rank that exited right after init fails with PeerLost, never stays in progress",
          "[fault][early-loss]") {
  expectEarlyLossNamed(1, 1, [](TcpBootstrap& b) {
    std::vector<unsigned char> v(8 * b.size(), static_cast<unsigned char>(b.rank()));
    const auto start = std::chrono::steady_clock::now();
    Request req = b.iallgather(v.data(), 8);
    while (!req.test()) {
      test::expect(secondsSince(start) < 30.0, "request still in progress after 30 s (deadline 20 s)");
      std::this_thread::sleep_for(100us);
    }
  });
}

TEST_CASE("a request that is only tested ends by the communicator's deadline with Timeout naming the late rank",
          "[fault][request-deadline]") {
  // Rank 2 is alive but never joins the all-gather: the others' requests, only
  // ever tested, must fail at their deadline as a blocking call would.
  const int n = 3, late = 2;
  fault::SharedSlots done(1);
  done[0].code = 0;
  auto res = test::runRanks(
      n,
      [&](int rank, const UniqueId& id) {
        quietChild();
        TcpBootstrap b(rank, n, id, TcpOptions{1500ms, {}, {}, {}});
        if (rank == late) {
          // Stays (linked and answering) until the others have reported.
          while (done[0].code.load() < n - 1) std::this_thread::sleep_for(5ms);
          return;
        }
        std::vector<unsigned char> v(8 * n, static_cast<unsigned char>(rank));
        const auto start = std::chrono::steady_clock::now();
        Request req = b.iallgather(v.data(), 8);
        try {
          while (!req.test()) {
            test::expect(secondsSince(start) < 10.0, "request still in progress after 10 s (deadline 1.5 s)");
            std::this_thread::sleep_for(200us);
          }
        } catch (const Error& e) {
          done[0].code.fetch_add(1);
          // Timeout, or Aborted by the rank that timed out first (it tells the others).
          test::expect(e.code() == ErrorCode::Timeout || e.code() == ErrorCode::Aborted,
                       "should time out, got " + describe(e));
          test::expect(std::string(e.what()).find("rank 2") != std::string::npos, "should name rank 2: " + describe(e));
          test::expect(secondsSince(start) < 2.5, "timed out only after " + std::to_string(secondsSince(start)) + " s");
          return;
        }
        done[0].code.fetch_add(1);
        throw std::runtime_error("an all-gather without rank 2 succeeded");
      },
      60s);
  INFO(test::summary(res));
  for (int r = 0; r < n; ++r) CHECK(res[r].exitCode == 0);
}

TEST_CASE("a frozen rank fails the others within the deadline plus a second, and is told it was aborted",
          "[fault][frozen]") {
  // Rank 1 stops itself (SIGSTOP) in the middle of a run of all-gathers. The
  // others must fail with Timeout naming it within the deadline plus a second
  // of the freeze; once resumed (after they have failed and left), rank 1's
  // call must say it was aborted, and by whom, not that a write failed. A
  // broadcast's ranks run different calls when one stops (a rank still in
  // broadcast#8 holds up broadcast#9 elsewhere): the blame must go through
  // that rank to the frozen one, never stop at it.
  const int n = 4, frozen = 1, rounds = 8;
  const auto deadline = 2000ms;
  for (int round = 0; round < rounds; ++round) {
    INFO("round " << round);
    fault::SharedSlots slots(n + 1);  // slot n: survivors reported (code), frozen pid (peer)
    slots[n].code = 0;
    auto res = test::runRanks(
        n,
        [&](int rank, const UniqueId& id) {
          quietChild();
          TcpBootstrap b(rank, n, id, TcpOptions{deadline, {}, {}, {}});
          std::vector<unsigned char> v(8 * n, static_cast<unsigned char>(rank));
          if (rank == frozen) {
            slots[n].peer = static_cast<int>(::getpid());
            std::thread([&] {
              std::this_thread::sleep_for(20ms);
              slots[frozen].eventUs = fault::nowUs();
              ::raise(SIGSTOP);
            }).detach();
          }
          try {
            std::vector<unsigned char> big(65536 * n), out(65536 * n);
            for (int i = 0; i < 10000000; ++i) {
              switch (round % 4) {
                case 0: b.allgather(v.data(), 8); break;
                case 1: b.barrier(); break;
                case 2: b.alltoall(big.data(), out.data(), 65536); break;
                default: b.broadcast(big.data(), 65536, i % n); break;
              }
            }
          } catch (const Error& e) {
            if (rank == frozen) {
              test::expect(e.code() == ErrorCode::Aborted, "the frozen rank should be told it was aborted, got " +
                                                               describe(e));
              test::expect(std::string(e.what()).find("aborted by rank") != std::string::npos,
                           "should say by whom: " + describe(e));
              return;
            }
            const double s = (fault::nowUs() - slots[frozen].eventUs.load()) / 1e6;
            const bool named = e.peer() == frozen || std::string(e.what()).find("rank 1") != std::string::npos;
            const int reported = slots[n].code.fetch_add(1) + 1;
            if (reported == n - 1) ::kill(slots[n].peer.load(), SIGCONT);  // the last survivor wakes it
            test::expect(e.code() == ErrorCode::Timeout || e.code() == ErrorCode::Aborted,
                         "should time out (or be aborted by a rank that did), got " + describe(e));
            test::expect(named, "should name rank 1: " + describe(e));
            test::expect(s < 2.0 + 1.5, "failed " + std::to_string(s) + " s after the freeze (deadline 2 s)");
            return;
          }
          throw std::runtime_error("never failed");
        },
        60s);
    INFO(test::summary(res));
    for (int r = 0; r < n; ++r) CHECK(res[r].exitCode == 0);
  }
}

TEST_CASE("a rank that closed its idle link to a rank waiting on it, then exited, is PeerLost at once",
          "[fault][early-loss][link-budget]") {
  // Under a link budget of 1, rank 0 closes its idle link to rank 1 (a
  // goodbye: rank 0 waits on nothing from rank 1) to open one to rank 2, while
  // rank 1 waits on a receive from rank 0. Rank 0 exits before it sends: rank
  // 1 must dial it (the link was closed in order, not lost) and learn it is
  // gone, not wait out its 20 s deadline. Before: Timeout after 20 s — at 64
  // ranks with budget 4 (scale-abort), every survivor of a killed rank 0 hung.
  ::setenv("TETHER_MAX_LINKS", "1", 1);
  const int n = 3;
  for (int round = 0; round < 3; ++round) {
    INFO("round " << round);
    // slot n: code 1 once rank 1 posted its receive, 2 once rank 0 sent to rank 2; peer 1 once rank 1 reported
    fault::SharedSlots slots(n + 1);
    slots[n].code = 0;
    slots[n].peer = 0;
    auto res = test::runRanks(
        n,
        [&](int rank, const UniqueId& id) {
          quietChild();
          TcpBootstrap b(rank, n, id, TcpOptions{20s, {}, {}, {}});
          std::uint64_t word = 7;
          if (rank == 0) {
            b.send(&word, sizeof word, 1, 1);
            while (slots[n].code.load() == 0) std::this_thread::sleep_for(1ms);
            b.send(&word, sizeof word, 2, 1);  // over the budget: the idle link to rank 1 says goodbye
            slots[n].code = 2;
            std::this_thread::sleep_for(1s);  // rank 1 reads the goodbye and closes in order
            slots[0].eventUs = fault::nowUs();
            ::_exit(0);
          }
          // Rank 2 receives only once rank 0 has sent (its receive would dial rank 0 first).
          if (rank == 2)
            while (slots[n].code.load() != 2) std::this_thread::sleep_for(1ms);
          b.recv(&word, sizeof word, 0, 1);
          if (rank == 2) {
            while (slots[n].peer.load() == 0) std::this_thread::sleep_for(5ms);
            return;
          }
          Request r = b.irecv(&word, sizeof word, 0, 2);
          slots[n].code = 1;
          try {
            r.wait();
          } catch (const Error& e) {
            slots[n].peer = 1;
            const double s = (fault::nowUs() - slots[0].eventUs.load()) / 1e6;
            test::expect(e.code() == ErrorCode::PeerLost && e.peer() == 0,
                         "should be PeerLost naming rank 0, got " + describe(e));
            test::expect(s < 5.0, "noticed " + std::to_string(s) + " s after rank 0 exited (deadline 20 s)");
            return;
          }
          slots[n].peer = 1;
          throw std::runtime_error("a receive from a rank that exited succeeded");
        },
        60s);
    INFO(test::summary(res));
    CHECK(res[1].exitCode == 0);
    CHECK(res[2].exitCode == 0);
  }
  ::unsetenv("TETHER_MAX_LINKS");
}
