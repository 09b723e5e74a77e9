// InProcessWorld: timeouts, aborts, protocol mismatches and invalid arguments
// give the same error codes as TcpBootstrap, with messages naming rank, peer
// and operation.
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <tether/request.hpp>
#include <tether/testing/in_process.hpp>

#include "testing_api_support.hpp"

using tether::Bootstrap;
using tether::Error;
using tether::ErrorCode;
using tether::testing::InProcessWorld;
using namespace testing_api;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {
// Per-rank outcome of a body that is expected to fail on some ranks.
struct Outcome {
  bool threw = false;
  ErrorCode code = ErrorCode::System;
  std::string message;
  int rank = -9, peer = -9;
  void record(const Error& e) { threw = true, code = e.code(), message = e.what(), rank = e.rank(), peer = e.peer(); }
};
}  // namespace

// The first rank to time out aborts the world (as TcpBootstrap does for a
// failed world collective), so a rank may see that abort before its own deadline.
TEST_CASE("a rank that never calls makes the others time out, naming rank, peer and op", "[testing-api]") {
  InProcessWorld world(3);
  std::vector<Outcome> outcomes(3);
  std::vector<long long> elapsedMs(3, 0);
  world.run([&](Bootstrap& b) {
    b.setTimeout(milliseconds(200));
    if (b.rank() == 2) {  // never joins; learns of the failure through the abort
      b.setTimeout(milliseconds(5000));
      int value = 0;
      try {
        b.recv(&value, sizeof value, 0, 0);
      } catch (const Error& e) {
        outcomes[2].record(e);
      }
      return;
    }
    const auto start = Clock::now();
    std::vector<int> all(3);
    try {
      b.allgather(all.data(), sizeof(int));
    } catch (const Error& e) {
      outcomes[b.rank()].record(e);
    }
    elapsedMs[b.rank()] = std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
    // A failed collective leaves the communicator unusable for collectives.
    auto after = errorFrom([&] { b.barrier(); });
    check(after.code() == ErrorCode::Protocol &&
              contains(after.what(), "barrier#2: communicator unusable after an earlier collective failed: rank "),
          std::string("after a timeout: ") + after.what());
  });
  int timedOut = 0;
  for (int r = 0; r < 2; ++r) {
    CAPTURE(r, outcomes[r].message);
    REQUIRE(outcomes[r].threw);
    REQUIRE(outcomes[r].rank == r);
    REQUIRE(elapsedMs[r] < 10000);  // the deadline ended the wait
    if (outcomes[r].code == ErrorCode::Timeout) {
      // Each rank names the rank it waited for: rank 2 itself, or (in the
      // tree all-gather, where rank 1 waits for the root's broadcast) rank 0.
      ++timedOut;
      REQUIRE((outcomes[r].peer == 2 || outcomes[r].peer == 0));
      REQUIRE(
          contains(outcomes[r].message, "rank " + std::to_string(r) + ": allgather#1: timed out waiting for step "));
      REQUIRE(contains(outcomes[r].message, " from rank " + std::to_string(outcomes[r].peer)));
      REQUIRE(elapsedMs[r] >= 190);  // the deadline was honoured
    } else {
      REQUIRE(outcomes[r].code == ErrorCode::Aborted);
      REQUIRE(contains(outcomes[r].message, "aborted by rank " + std::to_string(1 - r) + ": rank " +
                                                std::to_string(1 - r) + ": allgather#1: timed out"));
    }
  }
  REQUIRE(timedOut >= 1);
  REQUIRE(outcomes[2].code == ErrorCode::Aborted);
  REQUIRE(contains(outcomes[2].message, "rank 2: recv from rank 0 tag 0: aborted by rank "));
  REQUIRE(contains(outcomes[2].message, "timed out waiting for step"));
}

TEST_CASE("a failed child collective does not abort ranks outside the child", "[testing-api]") {
  InProcessWorld world(3);
  std::vector<Outcome> outcomes(3);
  std::vector<int> gathered(3, -1);
  world.run([&](Bootstrap& b) {
    b.setTimeout(milliseconds(2000));
    auto child = b.split(b.rank() == 2 ? Bootstrap::kNoColor : 0, 0);
    if (child) {
      child->setTimeout(milliseconds(300));  // the rank that did not notice waits this long
      std::vector<unsigned char> buffer(64);
      try {
        child->allgather(buffer.data(), child->rank() == 0 ? 8 : 4);
      } catch (const Error& e) {
        outcomes[b.rank()].record(e);
      }
    }
    int all[3] = {0, 0, 0};
    all[b.rank()] = b.rank() + 1;
    b.allgather(all, sizeof(int));  // the world communicator still works
    gathered[b.rank()] = all[0] + all[1] + all[2];
  });
  // The rank that receives the wrong size notices; the other then waits for
  // a step that never comes (a child's failure does not abort the world).
  REQUIRE((outcomes[0].code == ErrorCode::Protocol || outcomes[1].code == ErrorCode::Protocol));
  for (int r : {0, 1}) {
    CAPTURE(outcomes[r].message);
    REQUIRE((outcomes[r].code == ErrorCode::Protocol || outcomes[r].code == ErrorCode::Timeout));
    REQUIRE(contains(outcomes[r].message,
                     "rank " + std::to_string(r) + " (world " + std::to_string(r) + "): allgather#1 (comm "));
  }
  REQUIRE_FALSE(outcomes[2].threw);
  REQUIRE(gathered == std::vector<int>{6, 6, 6});
}

TEST_CASE("recv times out when nothing is sent", "[testing-api]") {
  InProcessWorld world(2);
  auto b = world.bootstrap(1);
  b->setTimeout(milliseconds(100));
  int value = 0;
  Error e = errorFrom([&] { b->recv(&value, sizeof value, 0, 5); });
  REQUIRE(e.code() == ErrorCode::Timeout);
  REQUIRE(contains(e.what(), "rank 1: recv from rank 0 tag 5: timed out waiting for a message with tag 5 from rank 0"));
  // A timed-out recv does not eat a later message.
  world.bootstrap(0)->send(&(value = 7), sizeof value, 1, 5);
  b->recv(&value, sizeof value, 0, 5);
  REQUIRE(value == 7);
}

TEST_CASE("abort from another thread wakes this rank and every other rank", "[testing-api]") {
  InProcessWorld world(3);
  std::vector<Outcome> outcomes(3);
  std::thread aborter([&] {
    std::this_thread::sleep_for(milliseconds(50));
    world.bootstrap(0)->abort("operator pressed stop");
  });
  const auto start = Clock::now();
  world.run([&](Bootstrap& b) {
    int value = 0;
    try {
      if (b.rank() == 2)
        b.recv(&value, sizeof value, 1, 0);  // nobody sends
      else
        b.barrier();  // rank 2 never joins
    } catch (const Error& e) {
      outcomes[b.rank()].record(e);
    }
  });
  aborter.join();
  REQUIRE(Clock::now() - start < std::chrono::seconds(10));  // not the 300 s default
  REQUIRE(outcomes[0].code == ErrorCode::Aborted);
  REQUIRE(outcomes[0].peer == 0);  // this rank's own abort
  REQUIRE(contains(outcomes[0].message, "rank 0: barrier#1: "));
  REQUIRE(contains(outcomes[0].message, ": aborted on this rank: operator pressed stop"));
  for (int r : {1, 2}) {
    REQUIRE(outcomes[r].threw);
    REQUIRE(outcomes[r].code == ErrorCode::Aborted);
    REQUIRE(outcomes[r].peer == 0);
    REQUIRE(contains(outcomes[r].message, "rank " + std::to_string(r) + ": "));
    REQUIRE(contains(outcomes[r].message, "aborted by rank 0: operator pressed stop"));
  }
  REQUIRE(contains(outcomes[2].message, "recv from rank 1 tag 0"));
  // Future calls fail too, even those that would not block.
  int value = 1;
  REQUIRE(errorFrom([&] { world.bootstrap(1)->send(&value, sizeof value, 2, 0); }).code() == ErrorCode::Aborted);
  REQUIRE(errorFrom([&] { world.bootstrap(2)->barrier({2}); }).code() == ErrorCode::Aborted);
}

TEST_CASE("abortAll ends pending calls; run() rethrows the first failure", "[testing-api]") {
  InProcessWorld world(2);
  std::thread aborter([&] {
    std::this_thread::sleep_for(milliseconds(50));
    world.abortAll("test over");
  });
  Error e = errorFrom([&] {
    world.run([](Bootstrap& b) {
      int value;
      b.recv(&value, sizeof value, 1 - b.rank(), 0);
    });
  });
  aborter.join();
  REQUIRE(e.code() == ErrorCode::Aborted);
  REQUIRE(contains(e.what(), "aborted by InProcessWorld::abortAll: test over"));
  REQUIRE(contains(e.what(), "also failed: rank"));  // the other rank's error is appended
}

TEST_CASE("a body that throws aborts the other ranks instead of letting them wait", "[testing-api]") {
  InProcessWorld world(3);
  const auto start = Clock::now();
  try {
    world.run([](Bootstrap& b) {
      if (b.rank() == 1) throw std::logic_error("setup failed on rank 1");
      b.barrier();
    });
    FAIL("run() returned");
  } catch (const std::logic_error& e) {
    REQUIRE(std::string(e.what()) == "setup failed on rank 1");
  }
  REQUIRE(Clock::now() - start < std::chrono::seconds(10));
}

TEST_CASE("different collectives at the same id: Protocol naming both, then the world is aborted", "[testing-api]") {
  InProcessWorld world(2);
  std::vector<Outcome> outcomes(2);
  world.run([&](Bootstrap& b) {
    b.setTimeout(milliseconds(2000));
    std::vector<unsigned char> buffer(64);
    int go = 1;
    try {
      b.barrier();  // #1 agrees
      if (b.rank() == 0) {
        b.broadcast(buffer.data(), 64, 0);  // #2: the root only sends
        b.send(&go, sizeof go, 1, 9);       // rank 1 starts #2 only now: rank 1 notices
      } else {
        b.recv(&go, sizeof go, 0, 9);
        b.allgather(buffer.data(), 32);  // #2
      }
    } catch (const Error& e) {
      outcomes[b.rank()].record(e);
    }
  });
  REQUIRE_FALSE(outcomes[0].threw);
  REQUIRE(outcomes[1].code == ErrorCode::Protocol);
  REQUIRE(outcomes[1].rank == 1);
  REQUIRE(outcomes[1].peer == 0);
  REQUIRE(contains(outcomes[1].message,
                   "rank 1: allgather#2: rank 0 is in broadcast#2 step 0 (64 bytes) — the ranks "
                   "called different collectives"));
  // Like TcpBootstrap, the rank that noticed aborted the world with that error as reason.
  // Rank 1's communicator refuses further collectives ...
  auto next = errorFrom([&] { world.bootstrap(1)->barrier(); });
  REQUIRE(next.code() == ErrorCode::Protocol);
  REQUIRE(contains(next.what(),
                   "rank 1: barrier#3: communicator unusable after an earlier collective failed: "
                   "rank 1: allgather#2: rank 0 is in broadcast#2"));
  // ... and, like TcpBootstrap, the rank that noticed aborted the world with that error as reason.
  int value = 0;
  auto mine = errorFrom([&] { world.bootstrap(1)->recv(&value, sizeof value, 0, 0); });
  REQUIRE(mine.code() == ErrorCode::Aborted);
  REQUIRE(contains(mine.what(), "rank 1: recv from rank 0 tag 0: aborted on this rank: rank 1: allgather#2"));
  auto theirs = errorFrom([&] { world.bootstrap(0)->send(&value, sizeof value, 1, 0); });
  REQUIRE(theirs.code() == ErrorCode::Aborted);
  REQUIRE(theirs.peer() == 1);
  REQUIRE(contains(theirs.what(), "aborted by rank 1: rank 1: allgather#2"));
}

// "A mismatch is noticed even from a peer this rank is not waiting on" and
// "alltoallv counts that disagree ..." run in both worlds:
// testing_api_mismatch.hpp.

// With both ranks waiting, whichever notices first aborts the other: each rank
// ends with Protocol itself or Aborted carrying the noticing rank's Protocol text.
TEST_CASE("the same collective with different sizes: Protocol naming both sizes", "[testing-api]") {
  for (int round = 0; round < 20; ++round) {
    InProcessWorld world(2);
    std::vector<Outcome> outcomes(2);
    world.run([&](Bootstrap& b) {
      b.setTimeout(milliseconds(2000));
      std::vector<unsigned char> buffer(64);
      try {
        b.allgather(buffer.data(), b.rank() == 0 ? 32 : 16);
      } catch (const Error& e) {
        outcomes[b.rank()].record(e);
      }
    });
    // Which step carries the mismatch depends on the algorithm; the sender and
    // this rank's expected size are always named.
    const char* seenBy0 = "rank 0: allgather#1: rank 1 sent allgather#1 step ";
    const char* seenBy1 = "rank 1: allgather#1: rank 0 sent allgather#1 step ";
    REQUIRE((outcomes[0].code == ErrorCode::Protocol || outcomes[1].code == ErrorCode::Protocol));
    for (int r = 0; r < 2; ++r) {
      CAPTURE(round, r, outcomes[r].message);
      REQUIRE(outcomes[r].threw);
      if (outcomes[r].code == ErrorCode::Protocol) {
        REQUIRE(contains(outcomes[r].message, r == 0 ? seenBy0 : seenBy1));
      } else {
        REQUIRE(outcomes[r].code == ErrorCode::Aborted);
        REQUIRE(contains(outcomes[r].message, "aborted by rank " + std::to_string(1 - r)));
        REQUIRE(contains(outcomes[r].message, r == 0 ? seenBy1 : seenBy0));
      }
    }
  }
}

TEST_CASE("send/recv size mismatch is a Protocol error naming both sizes", "[testing-api]") {
  InProcessWorld world(2);
  std::uint64_t small = 5;
  world.bootstrap(0)->send(&small, sizeof small, 1, 3);
  unsigned char big[16];
  Error e = errorFrom([&] { world.bootstrap(1)->recv(big, sizeof big, 0, 3); });
  REQUIRE(e.code() == ErrorCode::Protocol);
  REQUIRE(e.rank() == 1);
  REQUIRE(e.peer() == 0);
  REQUIRE(contains(e.what(),
                   "rank 1: recv from rank 0 tag 3: rank 0 sent send tag 3 (8 bytes), this rank expects 16 "
                   "bytes"));
}

// As over TCP (test/multiproc/errors_test.cpp, the same texts): a message no
// receiver would accept is refused at either end before a byte moves.
TEST_CASE("a message over TETHER_MAX_PAYLOAD_BYTES is InvalidArgument at the sender and the receiver",
          "[testing-api]") {
  ::setenv("TETHER_MAX_PAYLOAD_BYTES", "65536", 1);
  InProcessWorld world(2);
  ::unsetenv("TETHER_MAX_PAYLOAD_BYTES");
  world.run([](Bootstrap& b) {
    std::vector<unsigned char> big(65537, 1);
    const std::string r = "rank " + std::to_string(b.rank()) + ": ";
    const std::string what = " 65537 bytes is more than TETHER_MAX_PAYLOAD_BYTES=65536";
    auto refused = [&](const std::string& text, const std::function<void()>& call) {
      const Error e = errorFrom(call);
      check(e.code() == ErrorCode::InvalidArgument && contains(e.what(), text), std::string("refused: ") + e.what());
    };
    if (b.rank() == 0) {
      refused(r + "send:" + what, [&] { b.send(big.data(), big.size(), 1, 3); });
      refused(r + "isend:" + what, [&] { (void)b.isend(big.data(), big.size(), 1, 3); });
      b.send(big.data(), 65536, 1, 3);  // at the limit: delivered
    } else {
      refused(r + "recv:" + what, [&] { b.recv(big.data(), big.size(), 0, 3); });
      refused(r + "irecv:" + what, [&] { (void)b.irecv(big.data(), big.size(), 0, 3); });
      b.recv(big.data(), 65536, 0, 3);
    }
    b.barrier();  // nobody was blamed: the communicator still works
  });
}

TEST_CASE("invalid arguments are InvalidArgument naming rank, peer and operation", "[testing-api]") {
  InProcessWorld world(4);
  auto b = world.bootstrap(2);
  int value = 0;
  auto expectInvalid = [](const Error& e, const std::string& part) {
    CAPTURE(e.what());
    REQUIRE(e.code() == ErrorCode::InvalidArgument);
    REQUIRE(e.rank() != -9);
    REQUIRE(contains(e.what(), part));
  };
  expectInvalid(errorFrom([&] { b->send(&value, sizeof value, 4, 0); }), "rank 2: send: peer 4 is out of range [0, 4)");
  expectInvalid(errorFrom([&] { b->recv(&value, sizeof value, -1, 0); }),
                "rank 2: recv: peer -1 is out of range [0, 4)");
  expectInvalid(errorFrom([&] { b->send(&value, sizeof value, 1, -3); }), "rank 2: send: negative tag -3");
  expectInvalid(errorFrom([&] { b->recv(nullptr, 4, 1, 0); }), "rank 2: recv: null buffer for 4 bytes");
  expectInvalid(errorFrom([&] { b->allgather(nullptr, 8); }), "rank 2: allgather: null buffer for 8 bytes");
  expectInvalid(errorFrom([&] { b->broadcast(&value, sizeof value, 4); }), "rank 2: broadcast: root 4 is out of range");
  expectInvalid(errorFrom([&] { b->broadcast(&value, sizeof value, -1); }), "root -1 is out of range");
  std::vector<int> buffer(8);
  expectInvalid(errorFrom([&] { b->alltoall(buffer.data(), buffer.data() + 2, sizeof(int)); }), "overlap");
  expectInvalid(errorFrom([&] { b->barrier({0, 1}); }), "subset barrier: the list does not contain this rank");
  expectInvalid(errorFrom([&] { b->barrier({2, 1, 2}); }), "subset barrier: duplicate rank in the list");
  expectInvalid(errorFrom([&] { b->barrier({2, 7}); }), "subset barrier: rank 7 is out of range");
  expectInvalid(errorFrom([&] { b->split(-5, 0); }), "rank 2: split: negative color -5");
  expectInvalid(errorFrom([&] { b->setTimeout(milliseconds(-1)); }), "rank 2: setTimeout: negative timeout");
  // Totals that overflow size_t, and buffers past the end of the address space.
  const std::size_t huge = SIZE_MAX / 4 + 2;  // x 4 ranks wraps
  expectInvalid(errorFrom([&] { b->allgather(buffer.data(), huge); }),
                "rank 2: allgather: bytesPerRank x ranks = " + std::to_string(huge) + " x 4 overflows size_t");
  expectInvalid(errorFrom([&] { b->alltoall(buffer.data(), buffer.data(), huge); }),
                "rank 2: alltoall: bytesPerRank x ranks");
  std::size_t counts[4] = {1, 1, 1, 1}, displs[4] = {0, 1, 2, SIZE_MAX};
  expectInvalid(errorFrom([&] { b->alltoallv(buffer.data(), counts, displs, buffer.data() + 4, counts, counts); }),
                "rank 2: alltoallv: sendDispls[3] + sendCounts[3] = " + std::to_string(SIZE_MAX) + " + 1 overflows");
  expectInvalid(
      errorFrom([&] { b->broadcast(buffer.data(), SIZE_MAX - 8, 0); }),
      "rank 2: broadcast: a buffer of " + std::to_string(SIZE_MAX - 8) + " bytes does not fit in the address space");
  expectInvalid(errorFrom([&] { b->send(buffer.data(), SIZE_MAX - 8, 1, 0); }), "rank 2: send: a buffer of");
  REQUIRE(errorFrom([&] { b->send(&value, 4, 9, 0); }).peer() == 9);
  REQUIRE(errorFrom([] { InProcessWorld bad(0); }).code() == ErrorCode::InvalidArgument);
  REQUIRE(errorFrom([] { InProcessWorld bad(2, 3); }).code() == ErrorCode::InvalidArgument);
  REQUIRE(errorFrom([&] { world.bootstrap(4); }).code() == ErrorCode::InvalidArgument);
  // None of these consumed a collective id: the world still agrees.
  std::vector<int> all(4);
  world.run([&](Bootstrap& rank) {
    rank.allgather(all.data() + 0, 0);
    rank.barrier();
  });
}

// As TcpBootstrap fails the peers of a rank that closed its bootstrap ("lost
// rank 2: it closed its bootstrap"), a rank whose body returned fails the
// ranks still waiting for it at once, not at their deadline.
TEST_CASE("a rank whose body returns early fails its peers at once with PeerLost, as TcpBootstrap does",
          "[testing-api]") {
  InProcessWorld world(3);
  std::vector<Outcome> outcomes(3);
  std::vector<long long> elapsedMs(3, 0);
  int early = -1;
  world.run([&](Bootstrap& b) {
    b.setTimeout(milliseconds(60000));
    if (b.rank() == 2) {
      int token = 7;
      b.send(&token, sizeof token, 1, 5);  // sent before leaving: still delivered
      return;
    }
    const auto start = Clock::now();
    try {
      if (b.rank() == 1) {
        int token = 0;
        b.recv(&token, sizeof token, 2, 5);
        early = token;
        b.recv(&token, sizeof token, 2, 5);  // never sent
      } else {
        int token = 0;
        b.recv(&token, sizeof token, 2, 6);  // never sent
      }
    } catch (const Error& e) {
      outcomes[static_cast<std::size_t>(b.rank())].record(e);
    }
    elapsedMs[static_cast<std::size_t>(b.rank())] =
        std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
  });
  CAPTURE(outcomes[1].message, outcomes[0].message);
  REQUIRE(early == 7);
  REQUIRE(outcomes[1].code == ErrorCode::PeerLost);
  REQUIRE(outcomes[1].peer == 2);
  REQUIRE(contains(outcomes[1].message, "rank 1: recv from rank 2 tag 5: lost rank 2: it closed its bootstrap"));
  REQUIRE(elapsedMs[1] < 20000);  // well before the 60 s deadline
  REQUIRE(outcomes[0].code == ErrorCode::PeerLost);
  REQUIRE(contains(outcomes[0].message, "rank 0: recv from rank 2 tag 6: lost rank 2: it closed its bootstrap"));
  REQUIRE(elapsedMs[0] < 20000);
  // A world collective waiting for it fails the same way (and, as over TCP, aborts the world).
  auto e = errorFrom([&] {
    world.run([](Bootstrap& b) {
      b.setTimeout(milliseconds(60000));
      if (b.rank() != 2) b.barrier();
    });
  });
  CAPTURE(e.what());
  REQUIRE((e.code() == ErrorCode::PeerLost || e.code() == ErrorCode::Aborted));
  REQUIRE(contains(e.what(), "barrier#1: lost rank 2: it closed its bootstrap"));
}
