// InProcessWorld: timeouts, aborts, protocol mismatches and invalid arguments
// give the same error codes as TcpBootstrap, with messages naming rank, peer
// and operation.
#include <chrono>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
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

TEST_CASE("a rank that never calls makes the others time out, naming rank, peer and op", "[testing-api]") {
  InProcessWorld world(3);
  std::vector<Outcome> outcomes(3);
  std::vector<long long> elapsedMs(3, 0);
  world.run([&](Bootstrap& b) {
    if (b.rank() == 2) return;
    b.setTimeout(milliseconds(200));
    const auto start = Clock::now();
    std::vector<int> all(3);
    try {
      b.allgather(all.data(), sizeof(int));
    } catch (const Error& e) {
      outcomes[b.rank()].record(e);
    }
    elapsedMs[b.rank()] = std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
  });
  for (int r = 0; r < 2; ++r) {
    REQUIRE(outcomes[r].threw);
    REQUIRE(outcomes[r].code == ErrorCode::Timeout);
    REQUIRE(outcomes[r].rank == r);
    REQUIRE(outcomes[r].peer == 2);
    REQUIRE(contains(outcomes[r].message, "rank " + std::to_string(r) + ": allgather#1 from peer 2"));
    REQUIRE(elapsedMs[r] >= 190);   // the deadline was honoured ...
    REQUIRE(elapsedMs[r] < 10000);  // ... and ended the wait
  }
}

TEST_CASE("recv times out when nothing is sent", "[testing-api]") {
  InProcessWorld world(2);
  auto b = world.bootstrap(1);
  b->setTimeout(milliseconds(100));
  int value = 0;
  Error e = errorFrom([&] { b->recv(&value, sizeof value, 0, 5); });
  REQUIRE(e.code() == ErrorCode::Timeout);
  REQUIRE(contains(e.what(), "rank 1: recv(tag 5) from peer 0: timed out after 100 ms"));
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
      if (b.rank() == 2) b.recv(&value, sizeof value, 1, 0);  // nobody sends
      else b.barrier();  // rank 2 never joins
    } catch (const Error& e) {
      outcomes[b.rank()].record(e);
    }
  });
  aborter.join();
  REQUIRE(Clock::now() - start < std::chrono::seconds(10));  // not the 300 s default
  REQUIRE(outcomes[0].code == ErrorCode::Aborted);
  REQUIRE(outcomes[0].peer == -1);  // this rank's own abort
  REQUIRE(contains(outcomes[0].message, "rank 0: barrier#1 from peer "));
  REQUIRE(contains(outcomes[0].message, ": aborted: operator pressed stop"));
  for (int r : {1, 2}) {
    REQUIRE(outcomes[r].threw);
    REQUIRE(outcomes[r].code == ErrorCode::Aborted);
    REQUIRE(outcomes[r].peer == 0);
    REQUIRE(contains(outcomes[r].message, "rank " + std::to_string(r) + ": "));
    REQUIRE(contains(outcomes[r].message, "aborted by rank 0: operator pressed stop"));
  }
  REQUIRE(contains(outcomes[2].message, "recv(tag 0) from peer 1"));
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

TEST_CASE("different collectives at the same id are a Protocol error naming both", "[testing-api]") {
  InProcessWorld world(2);
  std::vector<Outcome> outcomes(2);
  world.run([&](Bootstrap& b) {
    b.setTimeout(milliseconds(2000));
    std::vector<unsigned char> buffer(64);
    try {
      b.barrier();  // #1 agrees
      if (b.rank() == 0) b.broadcast(buffer.data(), 64, 0);  // #2
      else b.allgather(buffer.data(), 32);                   // #2
    } catch (const Error& e) {
      outcomes[b.rank()].record(e);
    }
  });
  // The root only sends; it notices too if rank 1's allgather message is already there.
  if (outcomes[0].threw) {
    REQUIRE(outcomes[0].code == ErrorCode::Protocol);
    REQUIRE(contains(outcomes[0].message, "rank 0: broadcast#2 from peer 1: peer called allgather#2 (32 bytes)"));
  }
  REQUIRE(outcomes[1].code == ErrorCode::Protocol);
  REQUIRE(outcomes[1].peer == 0);
  REQUIRE(contains(outcomes[1].message,
                   "rank 1: allgather#2 from peer 0: peer called broadcast#2 root 0 (64 bytes)"));
  REQUIRE(contains(outcomes[1].message, "(64 bytes), expected allgather#2 (32 bytes)"));
  // The failed collective leaves rank 1's communicator unusable.
  auto after = errorFrom([&] { world.bootstrap(1)->barrier(); });
  REQUIRE(after.code() == ErrorCode::Protocol);
  REQUIRE(contains(after.what(), "barrier#3: communicator unusable"));
}

TEST_CASE("a mismatch is noticed even from a peer we are not waiting on", "[testing-api]") {
  InProcessWorld world(3);
  std::vector<Outcome> outcomes(3);
  world.run([&](Bootstrap& b) {
    b.setTimeout(milliseconds(2000));
    int data[3] = {0, 0, 0};
    try {
      // Rank 2 broadcasts from root 0, which never calls; rank 1 thinks the
      // root is 1 and sends. Rank 2 notices while still waiting on rank 0.
      if (b.rank() != 0) b.broadcast(data, sizeof(int), b.rank() == 1 ? 1 : 0);
    } catch (const Error& e) {
      outcomes[b.rank()].record(e);
    }
  });
  REQUIRE(outcomes[2].code == ErrorCode::Protocol);
  REQUIRE(outcomes[2].peer == 1);
  REQUIRE(contains(outcomes[2].message, "broadcast#1 from peer 1: peer called broadcast#1 root 1 (4 bytes), "
                                        "expected broadcast#1 root 0 (4 bytes)"));
}

TEST_CASE("the same collective with different sizes is a Protocol error on both sides", "[testing-api]") {
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
  REQUIRE(outcomes[0].code == ErrorCode::Protocol);
  REQUIRE(contains(outcomes[0].message, "peer called allgather#1 (16 bytes)"));
  REQUIRE(contains(outcomes[0].message, "expected allgather#1 (32 bytes)"));
  REQUIRE(outcomes[1].code == ErrorCode::Protocol);
  REQUIRE(contains(outcomes[1].message, "peer called allgather#1 (32 bytes)"));
}

TEST_CASE("alltoallv counts that disagree between sender and receiver are a Protocol error", "[testing-api]") {
  InProcessWorld world(2);
  std::vector<Outcome> outcomes(2);
  world.run([&](Bootstrap& b) {
    b.setTimeout(milliseconds(2000));
    unsigned char out[16] = {}, in[16] = {};
    std::size_t sendCounts[2] = {4, 4}, recvCounts[2] = {4, 4}, displs[2] = {0, 8};
    if (b.rank() == 1) recvCounts[0] = 6;  // rank 0 sends 4
    try {
      b.alltoallv(out, sendCounts, displs, in, recvCounts, displs);
    } catch (const Error& e) {
      outcomes[b.rank()].record(e);
    }
  });
  REQUIRE_FALSE(outcomes[0].threw);
  REQUIRE(outcomes[1].code == ErrorCode::Protocol);
  REQUIRE(contains(outcomes[1].message, "peer called alltoallv#1 (4 bytes to us)"));
  REQUIRE(contains(outcomes[1].message, "expected alltoallv#1 (6 bytes to us)"));
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
  REQUIRE(contains(e.what(), "rank 1: recv(tag 3) from peer 0: peer sent 8 bytes, expected 16 bytes"));
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
  expectInvalid(errorFrom([&] { b->send(&value, sizeof value, 4, 0); }), "rank 2: send(tag 0) to peer 4: peer out of range");
  expectInvalid(errorFrom([&] { b->recv(&value, sizeof value, -1, 0); }), "rank 2: recv(tag 0) from peer -1: peer out of range");
  expectInvalid(errorFrom([&] { b->send(&value, sizeof value, 1, -3); }), "send(tag -3) to peer 1: negative tag");
  expectInvalid(errorFrom([&] { b->recv(nullptr, 4, 1, 0); }), "null buffer with 4 bytes");
  expectInvalid(errorFrom([&] { b->allgather(nullptr, 8); }), "rank 2: allgather: null buffer");
  expectInvalid(errorFrom([&] { b->broadcast(&value, sizeof value, 4); }), "broadcast(root 4): root out of range");
  expectInvalid(errorFrom([&] { b->broadcast(&value, sizeof value, -1); }), "root out of range");
  std::vector<int> buffer(8);
  expectInvalid(errorFrom([&] { b->alltoall(buffer.data(), buffer.data() + 2, sizeof(int)); }), "overlap");
  expectInvalid(errorFrom([&] { b->barrier({0, 1}); }), "does not contain the caller");
  expectInvalid(errorFrom([&] { b->barrier({2, 1, 2}); }), "rank 2 listed twice");
  expectInvalid(errorFrom([&] { b->barrier({2, 7}); }), "rank 7 out of range");
  expectInvalid(errorFrom([&] { b->split(-5, 0); }), "split");
  expectInvalid(errorFrom([&] { b->setTimeout(milliseconds(-1)); }), "negative timeout");
  REQUIRE(errorFrom([&] { b->send(&value, 4, 9, 0); }).peer() == 9);
  REQUIRE(errorFrom([] { InProcessWorld bad(0); }).code() == ErrorCode::InvalidArgument);
  REQUIRE(errorFrom([] { InProcessWorld bad(2, 3); }).code() == ErrorCode::InvalidArgument);
  REQUIRE(errorFrom([&] { world.bootstrap(4); }).code() == ErrorCode::InvalidArgument);
  // None of these consumed a collective id: the world still agrees.
  std::vector<int> all(4);
  world.run([&](Bootstrap& rank) { rank.allgather(all.data() + 0, 0); rank.barrier(); });
}
