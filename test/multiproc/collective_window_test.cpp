// The collective send window (docs/design.md, "Bounded collectives"): a rank
// that runs ahead in one communicator's collectives (a broadcast's root
// calling again and again) stops once its peer holds a window (4 MiB) of its
// frames, so the peer's memory stays bounded; the root's call waits (and ends
// by its deadline, naming the peer); and another communicator's frames pass
// the ones that wait.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "multiproc.hpp"
#include "proc_stats.hpp"

using namespace tether;
using test::expect;

namespace {

using test::peakGrowthWhile;
using test::sharedCounter;

constexpr std::size_t kBlock = 16 * 1024;
constexpr std::int64_t kCalls = 4000;  // 64 MiB of broadcasts: 16 windows

// Broadcast number i carries i in every word.
void fill(std::vector<std::int64_t>& buf, std::int64_t i) { std::fill(buf.begin(), buf.end(), i); }
bool holds(const std::vector<std::int64_t>& buf, std::int64_t i) {
  return std::all_of(buf.begin(), buf.end(), [&](std::int64_t v) { return v == i; });
}

}  // namespace

// Without the window the peer stashed all 64 MiB (and the root finished every
// call before the peer made one); with it, about 4 MiB.
TEST_CASE("collectives: a peer holds at most a window of a root's broadcasts it has not entered, and the root waits",
          "[multiproc][collective][window]") {
  auto* done = sharedCounter();
  auto res = test::runRanks(
      2,
      [&](int rank, const UniqueId& id) {
        TcpOptions o;
        o.timeout = std::chrono::milliseconds(60000);
        TcpBootstrap b(rank, 2, id, o);
        b.barrier();  // the link is up
        std::vector<std::int64_t> buf(kBlock / sizeof(std::int64_t));
        if (rank == 0) {
          for (std::int64_t i = 0; i < kCalls; ++i) {
            fill(buf, i);
            b.broadcast(buf.data(), kBlock, 0);
            done->store(i + 1);
          }
        } else {
          // The root runs ahead: until it has made every call (no window) or
          // for 3 s (it waits for this rank).
          const long grownKb = peakGrowthWhile(*done, kCalls, std::chrono::seconds(3));
          const std::int64_t early = done->load();
          // The window (4 MiB and the frames' bookkeeping) plus slack for the rest of the process
          // (under a sanitizer, its shadow memory and quarantine too); without the window 64+ MiB.
#ifdef TETHER_TEST_SANITIZED
          constexpr long kBoundKb = 40 * 1024;
#else
          constexpr long kBoundKb = 16 * 1024;
#endif
          expect(grownKb < kBoundKb, "this rank's peak grew by " + std::to_string(grownKb) + " KiB while rank 0 made " +
                                     std::to_string(early) + " broadcasts it had not entered (window 4 MiB)");
          expect(early < kCalls, "rank 0 made all " + std::to_string(kCalls) + " broadcasts before this rank made one");
          for (std::int64_t i = 0; i < kCalls; ++i) {
            fill(buf, -1);
            b.broadcast(buf.data(), kBlock, 0);
            if (!holds(buf, i)) expect(false, "broadcast " + std::to_string(i) + " arrived with another's payload");
          }
        }
        b.barrier();
      },
      std::chrono::seconds(120));
  INFO(test::summary(res));
  REQUIRE(test::allOk(res));
}

TEST_CASE("collectives: a root that runs ahead of a peer that never enters times out naming that peer",
          "[multiproc][collective][window]") {
  auto* over = sharedCounter();
  auto res = test::runRanks(
      2,
      [&](int rank, const UniqueId& id) {
        TcpOptions o;
        o.timeout = std::chrono::milliseconds(30000);
        TcpBootstrap b(rank, 2, id, o);
        b.barrier();
        if (rank == 0) {
          b.setTimeout(std::chrono::milliseconds(1500));
          std::vector<std::int64_t> buf(kBlock / sizeof(std::int64_t));
          const auto began = std::chrono::steady_clock::now();
          std::string what;
          std::int64_t i = 0;
          for (; i < kCalls && what.empty(); ++i) {
            try {
              b.broadcast(buf.data(), kBlock, 0);
            } catch (const Error& e) {
              expect(e.code() == ErrorCode::Timeout, std::string("not a timeout: ") + e.what());
              what = e.what();
            }
          }
          over->store(1);
          expect(!what.empty(), std::to_string(i) + " broadcasts to a rank that enters none, and none waited");
          expect(std::chrono::steady_clock::now() - began < std::chrono::seconds(10), "the call ended by its deadline");
          expect(what.find("rank 1") != std::string::npos, "the error names the peer: " + what);
          expect(what.find("collective frames on this communicator") != std::string::npos,
                 "the error says what the peer has not received: " + what);
        } else {
          const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
          while (over->load() == 0 && std::chrono::steady_clock::now() < until)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
      },
      std::chrono::seconds(120));
  INFO(test::summary(res));
  REQUIRE(test::allOk(res));
}

// Each communicator has its own window to a peer: rank 0's broadcasts on the
// world communicator wait for rank 1, which first needs rank 0's frame of an
// all-gather on a child communicator; that frame passes them. (One window per
// peer would hold it behind them until the deadline.)
TEST_CASE("collectives: another communicator's frames pass the ones that wait for the window",
          "[multiproc][collective][window]") {
  auto res = test::runRanks(
      2,
      [&](int rank, const UniqueId& id) {
        TcpOptions o;
        o.timeout = std::chrono::milliseconds(30000);
        TcpBootstrap b(rank, 2, id, o);
        auto child = b.split(0, rank);
        std::vector<std::int64_t> buf(kBlock / sizeof(std::int64_t));
        std::vector<int> all(2);
        all[rank] = rank + 10;
        if (rank == 0) {
          std::thread ahead([&] {
            for (std::int64_t i = 0; i < kCalls / 4; ++i) {  // 16 MiB: four windows
              fill(buf, i);
              b.broadcast(buf.data(), kBlock, 0);
            }
          });
          std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the world's window fills
          child->allgather(all.data(), sizeof(int));
          ahead.join();
        } else {
          child->allgather(all.data(), sizeof(int));
          for (std::int64_t i = 0; i < kCalls / 4; ++i) {
            b.broadcast(buf.data(), kBlock, 0);
            if (!holds(buf, i)) expect(false, "broadcast " + std::to_string(i) + " arrived with another's payload");
          }
        }
        expect(all[0] == 10 && all[1] == 11, "the child's all-gather payload");
        b.barrier();
      },
      std::chrono::seconds(120));
  INFO(test::summary(res));
  REQUIRE(test::allOk(res));
}
