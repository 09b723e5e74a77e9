// Edges of the contract a runtime's own tests reach first — a receive of the
// wrong size, a rank talking to itself, empty calls, a message its sender
// sent just before it returned, a blocking collective beside a nonblocking
// one, a cancel too late, a subset barrier whose peer leaves, one tag on two
// communicators — asserted inside the rank bodies and run with the other
// conformance scenarios over InProcessWorld and TcpBootstrap
// (testing_api_conformance_test.cpp). Written 2026-12-07 as probes for
// places where the two worlds' code still differs (the wait, the leaving
// peer, the request deadline); both worlds agreed on every one, down to the
// error texts (but the peer's address TCP adds).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <tether/bootstrap.hpp>
#include <tether/error.hpp>
#include <tether/request.hpp>

#include "testing_api_support.hpp"

namespace testing_api {
namespace edges {

using std::chrono::milliseconds;
using tether::Bootstrap;
using tether::ErrorCode;

// Rank 0 sends 8 bytes, then 4, under one tag; rank 1's 16-byte receive
// fails Protocol (blocking, or an irecv posted before either came) and the
// next receive gets the second message: the first was consumed.
inline void wrongSizeConsumes(Bootstrap& b, bool posted) {
  b.setTimeout(milliseconds(5000));
  if (b.rank() == 0) {
    if (posted) p2pRendezvous(b, 41);
    const std::uint64_t word = 7;
    const std::uint32_t half = 9;
    b.send(&word, sizeof word, 1, 3);
    b.send(&half, sizeof half, 1, 3);
  } else {
    unsigned char big[16];
    const tether::Error e = errorFrom([&] {
      if (!posted) return b.recv(big, sizeof big, 0, 3);
      tether::Request r = b.irecv(big, sizeof big, 0, 3);
      p2pRendezvous(b, 41);
      r.wait();
    });
    check(e.code() == ErrorCode::Protocol && contains(e.what(), "8") && contains(e.what(), "16"),
          std::string("the 16-byte receive: ") + e.what());
    std::uint32_t half = 0;
    b.recv(&half, sizeof half, 0, 3);
    check(half == 9, "the next receive gets the second message, got " + std::to_string(half));
  }
  p2pRendezvous(b, 42);
}

inline void toItself(Bootstrap& b) {
  int x = 5 + b.rank(), y = 0;
  b.send(&x, sizeof x, b.rank(), 9);
  b.recv(&y, sizeof y, b.rank(), 9);
  check(y == x, "a blocking send to itself, then the receive");
  tether::Request r = b.irecv(&y, sizeof y, b.rank(), 10);
  x = 77;
  b.send(&x, sizeof x, b.rank(), 10);
  r.wait();
  check(y == 77, "an irecv from itself, then the send");
}

// Rank 1 sends and returns at once; rank 0 receives later.
inline void sentBeforeReturning(Bootstrap& b) {
  int x = 123;
  if (b.rank() == 1) {
    b.send(&x, sizeof x, 0, 8);
    return;
  }
  std::this_thread::sleep_for(milliseconds(300));
  int y = 0;
  b.recv(&y, sizeof y, 1, 8);
  check(y == 123, "the message of a rank that has left");
}

inline void emptyCalls(Bootstrap& b) {
  b.allgather(nullptr, 0);
  b.broadcast(nullptr, 0, 2);
  b.alltoall(nullptr, nullptr, 0);
  std::vector<std::size_t> zero(3, 0);
  b.alltoallv(nullptr, zero.data(), zero.data(), nullptr, zero.data(), zero.data());
  b.send(nullptr, 0, (b.rank() + 1) % 3, 4);
  b.recv(nullptr, 0, (b.rank() + 2) % 3, 4);
  b.ibarrier().wait();
  std::vector<int> all(3, -1);
  all[b.rank()] = b.rank();
  b.allgather(all.data(), sizeof(int));
  check(all[0] == 0 && all[1] == 1 && all[2] == 2, "an all-gather after the empty calls");
}

inline void blockingBesideNonblocking(Bootstrap& b) {
  std::vector<int> all(3, -1);
  all[b.rank()] = b.rank() * 10;
  tether::Request r = b.iallgather(all.data(), sizeof(int));
  b.barrier();
  std::vector<int> more(3, -1);
  more[b.rank()] = b.rank() + 100;
  b.allgather(more.data(), sizeof(int));
  r.wait();
  check(all[0] == 0 && all[1] == 10 && all[2] == 20, "the iallgather started first");
  check(more[0] == 100 && more[1] == 101 && more[2] == 102, "the allgather started while it ran");
}

inline void cancelTooLate(Bootstrap& b) {
  int v = 0;
  if (b.rank() == 0) {
    tether::Request r = b.irecv(&v, sizeof v, 1, 5);
    p2pRendezvous(b, 41);
    r.wait();
    check(!r.cancel(), "cancel() after the message matched is false");
    check(v == 55, "the data stays");
  } else {
    v = 55;
    b.send(&v, sizeof v, 0, 5);
    p2pRendezvous(b, 41);
  }
}

// Ranks 1 and 2 return; rank 0's subset barrier with rank 1 fails PeerLost
// at once, and the communicator is unusable after it.
inline void subsetPeerLeaves(Bootstrap& b) {
  b.setTimeout(milliseconds(60000));
  b.barrier();
  if (b.rank() != 0) return;
  const auto start = std::chrono::steady_clock::now();
  const tether::Error e = errorFrom([&] { b.barrier(std::vector<int>{0, 1}); });
  const auto took = std::chrono::steady_clock::now() - start;
  check(e.code() == ErrorCode::PeerLost && e.peer() == 1 && contains(e.what(), "rank 0: subset-barrier#1 (comm ") &&
            contains(e.what(), "lost rank 1: it closed its bootstrap"),
        std::string("the subset barrier: ") + e.what());
  check(took < std::chrono::seconds(20), "ends well before its 60 s deadline");
  const tether::Error next = errorFrom([&] { b.barrier(); });
  check(next.code() == ErrorCode::Protocol &&
            contains(next.what(),
                     "rank 0: barrier#2: communicator unusable after an earlier collective failed: "
                     "rank 0: subset-barrier#1"),
        std::string("the next collective: ") + next.what());
}

// A message on a split child and one on the world, same peer and tag (the
// child's ranks swapped): each lands in its own communicator's receive.
inline void oneTagTwoCommunicators(Bootstrap& b) {
  auto child = b.split(0, 1 - b.rank());
  const int childPeer = child->rank() == 0 ? 1 : 0;
  if (b.rank() == 0) {
    const int x = 1, y = 2;
    b.send(&x, sizeof x, 1, 7);
    child->send(&y, sizeof y, childPeer, 7);
  } else {
    int w = 0, c = 0;
    child->recv(&c, sizeof c, childPeer, 7);
    b.recv(&w, sizeof w, 0, 7);
    check(w == 1 && c == 2, "world " + std::to_string(w) + ", child " + std::to_string(c));
  }
}

inline std::vector<Case> cases() {
  return {
      {"a receive of the wrong size fails Protocol and consumes the message: the next receive gets the next one", 2,
       [](Bootstrap& b) { wrongSizeConsumes(b, false); }},
      {"an irecv of the wrong size, posted first, fails Protocol and consumes the message", 2,
       [](Bootstrap& b) { wrongSizeConsumes(b, true); }},
      {"a rank sends to itself, blocking and nonblocking", 2, toItself},
      {"a message sent just before its sender returned is received after", 2, sentBeforeReturning},
      {"empty collectives and messages (null buffers, 0 bytes) complete", 3, emptyCalls},
      {"a blocking collective while a nonblocking one runs on the same communicator", 3, blockingBesideNonblocking},
      {"cancel() after the message matched is false and keeps the data", 2, cancelTooLate},
      {"a subset barrier whose peer returned fails PeerLost at once, and the communicator with it", 3,
       subsetPeerLeaves},
      {"one tag on a split child and on the world: each message lands in its own communicator", 2,
       oneTagTwoCommunicators},
  };
}

}  // namespace edges
}  // namespace testing_api
