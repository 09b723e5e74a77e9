// The point-to-point send window (docs/design.md, "Bounded point-to-point"):
// a receiver that has not posted its receives holds at most
// TETHER_P2P_WINDOW_BYTES of one sender's messages, the sender's sends wait
// (and end by their deadline, naming the receiver and the window), and
// collectives pass the messages that wait.
#include <catch2/catch.hpp>

#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
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

constexpr const char* kWindow = "1048576";  // 1 MiB, TETHER_P2P_WINDOW_BYTES

}  // namespace

// ~110 bytes per stashed 8-byte message: 100,000 of them are about 11 MB
// without a window, twelve times the 1 MiB window.
TEST_CASE("p2p: a receiver that has not posted its receives holds at most the window, and the sender waits",
          "[multiproc][p2p][window]") {
  constexpr std::int64_t kMsgs = 100000;
  auto* sent = sharedCounter();
  auto res = test::runRanks(
      2,
      [&](int rank, const UniqueId& id) {
        ::setenv("TETHER_P2P_WINDOW_BYTES", kWindow, 1);
        TcpOptions o;
        o.timeout = std::chrono::milliseconds(60000);
        TcpBootstrap b(rank, 2, id, o);
        b.barrier();  // the link is up
        if (rank == 0) {
          for (std::int64_t i = 0; i < kMsgs; ++i) {
            b.send(&i, sizeof i, 1, 7);
            sent->store(i + 1);
          }
        } else {
          // The sender runs ahead: until it has sent everything (no window)
          // or for 3 s (it waits for this rank).
          const long grownKb = peakGrowthWhile(*sent, kMsgs, std::chrono::seconds(3));
          const std::int64_t early = sent->load();
          // The window and its messages' bookkeeping (~0.9 MB), plus slack for the rest of the process
          // (under a sanitizer, its shadow memory too: about 4x; without the window ~11 MB, 40+ MB there).
#ifdef TETHER_TEST_SANITIZED
          constexpr long kBoundKb = 4 * 4096;
#else
          constexpr long kBoundKb = 4096;
#endif
          expect(grownKb < kBoundKb, "the receiver's peak grew by " + std::to_string(grownKb) + " KiB while rank 0 sent " +
                                     std::to_string(early) + " messages it had not received (window 1 MiB)");
          expect(early < kMsgs, "rank 0 sent all " + std::to_string(kMsgs) + " messages before any was received");
          for (std::int64_t i = 0; i < kMsgs; ++i) {
            std::int64_t v = -1;
            b.recv(&v, sizeof v, 0, 7);
            if (v != i) expect(false, "message " + std::to_string(i) + " arrived as " + std::to_string(v));
          }
        }
        b.barrier();
      },
      std::chrono::seconds(120));
  INFO(test::summary(res));
  REQUIRE(test::allOk(res));
}

TEST_CASE("p2p: a send the receiver leaves unreceived past the window times out naming the receiver and the window",
          "[multiproc][p2p][window]") {
  auto res = test::runRanks(
      2,
      [&](int rank, const UniqueId& id) {
        ::setenv("TETHER_P2P_WINDOW_BYTES", "65536", 1);
        TcpOptions o;
        o.timeout = std::chrono::milliseconds(30000);
        TcpBootstrap b(rank, 2, id, o);
        b.barrier();
        if (rank == 0) {
          b.setTimeout(std::chrono::milliseconds(1500));
          const auto began = std::chrono::steady_clock::now();
          std::string what;
          std::int64_t i = 0;
          for (; i < 200000 && what.empty(); ++i) {
            try {
              b.send(&i, sizeof i, 1, 7);
            } catch (const Error& e) {
              expect(e.code() == ErrorCode::Timeout, std::string("not a timeout: ") + e.what());
              what = e.what();
            }
          }
          expect(!what.empty(), std::to_string(i) + " sends of 8 bytes to a rank that receives none, and none waited");
          expect(std::chrono::steady_clock::now() - began < std::chrono::seconds(10), "the send ended by its deadline");
          expect(what.find("rank 1") != std::string::npos, "the error names the receiver: " + what);
          expect(what.find("TETHER_P2P_WINDOW_BYTES=65536") != std::string::npos,
                 "the error names the window: " + what);
          b.setTimeout(std::chrono::milliseconds(30000));
        }
        b.barrier();
      },
      std::chrono::seconds(120));
  INFO(test::summary(res));
  REQUIRE(test::allOk(res));
}

// The sender's messages wait for the window on its side, not in the stream:
// a collective's frames pass them, so a receiver that enters the collective
// before it receives is not blocked by them.
TEST_CASE("p2p: collectives pass the messages that wait for the window", "[multiproc][p2p][window]") {
  auto res = test::runRanks(
      2,
      [&](int rank, const UniqueId& id) {
        ::setenv("TETHER_P2P_WINDOW_BYTES", "65536", 1);
        TcpOptions o;
        o.timeout = std::chrono::milliseconds(30000);
        TcpBootstrap b(rank, 2, id, o);
        constexpr int kMsgs = 20000;  // 8 bytes each: about 40 windows
        std::vector<std::int64_t> out(kMsgs);
        std::vector<Request> reqs;
        if (rank == 0)
          for (int i = 0; i < kMsgs; ++i) {
            out[i] = i;
            reqs.push_back(b.isend(&out[i], sizeof out[i], 1, 3));
          }
        b.barrier();
        std::vector<int> all(2);
        all[rank] = rank + 10;
        b.allgather(all.data(), sizeof(int));
        expect(all[0] == 10 && all[1] == 11, "the all-gather's payload");
        if (rank == 1)
          for (int i = 0; i < kMsgs; ++i) {
            std::int64_t v = -1;
            b.recv(&v, sizeof v, 0, 3);
            if (v != i) expect(false, "message " + std::to_string(i) + " arrived as " + std::to_string(v));
          }
        for (auto& r : reqs) r.wait();
        b.barrier();
      },
      std::chrono::seconds(120));
  INFO(test::summary(res));
  REQUIRE(test::allOk(res));
}
