// How errors name ranks on a child communicator, on any tether::Bootstrap:
// by the child's own ranks, as its caller numbers them, each followed by its
// world rank — "rank 0 (world 1): allgather#1: timed out waiting for step 0
// from rank 1 (world 2)" — and Error::rank() and Error::peer() are child
// ranks, so a runtime can index its child-communicator arrays with them. Run
// with the other conformance scenarios over InProcessWorld and TcpBootstrap
// (testing_api_conformance_test.cpp): before 2026-12-07 TCP named world ranks
// there ("rank 1: ... from rank 2", rank() 1, peer() 2) and the testing world
// child ranks without the peer's world rank; before 2026-12-07 (later) the
// testing world named a child's collective without its communicator
// ("allgather#1", where TCP says "allgather#1 (comm 5d2e9a01c0ffee00)").
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <tether/bootstrap.hpp>
#include <tether/error.hpp>

#include "testing_api_support.hpp"

namespace testing_api {
namespace child_names {

using std::chrono::milliseconds;
using tether::Bootstrap;
using tether::ErrorCode;

inline void expect(const tether::Error& e, ErrorCode code, int rank, int peer, const std::vector<std::string>& parts,
                   const std::string& what) {
  const std::string text = std::string(tether::toString(e.code())) + " rank() " + std::to_string(e.rank()) +
                           " peer() " + std::to_string(e.peer()) + ": " + e.what();
  check(e.code() == code, what + ": the code: " + text);
  check(e.rank() == rank, what + ": rank() is the child rank " + std::to_string(rank) + ": " + text);
  check(e.peer() == peer, what + ": peer() is the child rank " + std::to_string(peer) + ": " + text);
  for (const auto& part : parts) check(contains(e.what(), part), what + ": says \"" + part + "\": " + text);
}

// World rank 0 stays out of the child; world ranks 1 and 2 are its ranks 0
// and 1. Child rank 1 first waits (in a world receive) while child rank 0's
// all-gather and receive time out; then child rank 0 sends 8 bytes where
// child rank 1 receives 4.
inline void errorsNameChildRanks(Bootstrap& b) {
  b.setTimeout(milliseconds(20000));
  auto child = b.split(b.rank() == 0 ? Bootstrap::kNoColor : 0, b.rank());
  int token = 0;
  if (child && child->rank() == 0) {
    child->setTimeout(milliseconds(300));
    int all[2] = {};
    expect(errorFrom([&] { child->allgather(all, sizeof(int)); }), ErrorCode::Timeout, 0, 1,
           {"rank 0 (world 1): allgather#1 (comm ", "timed out waiting for step 0 from rank 1 (world 2"},
           "a child all-gather without child rank 1");
    expect(
        errorFrom([&] { child->recv(&token, sizeof token, 1, 5); }), ErrorCode::Timeout, 0, 1,
        {"rank 0 (world 1): recv from rank 1 tag 5: timed out waiting for a message with tag 5 from rank 1 (world 2"},
        "a child receive from child rank 1");
    b.send(&token, sizeof token, 2, 77);
    long long eight = 8;
    child->send(&eight, sizeof eight, 1, 6);
  } else if (child) {
    b.recv(&token, sizeof token, 1, 77);
    int four = 0;
    expect(errorFrom([&] { child->recv(&four, sizeof four, 0, 6); }), ErrorCode::Protocol, 1, 0,
           {"rank 1 (world 2): recv from rank 0 tag 6: rank 0 (world 1) sent ", "this rank expects 4 bytes"},
           "a child receive of 4 bytes where child rank 0 sent 8");
  }
  b.barrier();
}

// The same for a peer that left: world rank 2 (child rank 1) returns (its
// TcpBootstrap is closed; an in-process rank has left) and child rank 0's
// receive from it fails at once with PeerLost naming it by its child rank
// (why it is gone depends on timing over TCP: it closed its bootstrap, or it
// refuses the connection this receive opens).
inline void lostPeerNamedByChildRank(Bootstrap& b) {
  b.setTimeout(milliseconds(20000));
  auto child = b.split(b.rank() == 0 ? Bootstrap::kNoColor : 0, b.rank());
  if (!child || child->rank() == 1) return;
  int token = 0;
  expect(errorFrom([&] { child->recv(&token, sizeof token, 1, 5); }), ErrorCode::PeerLost, 0, 1,
         {"rank 0 (world 1): recv from rank 1 tag 5: lost rank 1 (world 2): "},  // then why: it closed, or refuses
         "a child receive from child rank 1, which left");
}

// A subset barrier is a communicator of its own: its error names it by its
// id, as a child's collective is named ("subset-barrier#1 (comm ...)"),
// and ranks by the parent's numbering. Rank 0 enters a barrier of {0, 2}
// that rank 2 never enters, then releases rank 2 with a message. (Before
// 2026-12-07 the testing world named it "subset-barrier#1".)
inline void subsetBarrierNamedByItsCommunicator(Bootstrap& b) {
  b.setTimeout(milliseconds(20000));
  int token = 0;
  if (b.rank() == 0) {
    b.setTimeout(milliseconds(300));
    expect(errorFrom([&] {
             b.barrier({0, 2});
           }),
           ErrorCode::Timeout, 0, 2, {"rank 0: subset-barrier#1 (comm ", "): timed out waiting for step 0 from rank 2"},
           "a subset barrier that rank 2 never enters");
    b.setTimeout(milliseconds(20000));
    b.send(&token, sizeof token, 2, 9);
  } else if (b.rank() == 2) {
    b.recv(&token, sizeof token, 0, 9);
  }
}

inline std::vector<Case> cases() {
  return {{"on a child communicator errors name child ranks, each with its world rank", 3, errorsNameChildRanks},
          {"on a child communicator a peer that left is named by its child rank", 3, lostPeerNamedByChildRank},
          {"a subset barrier's error names its own communicator", 3, subsetBarrierNamedByItsCommunicator}};
}

}  // namespace child_names
}  // namespace testing_api
