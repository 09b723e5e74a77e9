// Mismatches a rank notices on any tether::Bootstrap, run with the other
// conformance scenarios over InProcessWorld and TcpBootstrap
// (testing_api_conformance_test.cpp): until 2026-12-07 they ran over
// InProcessWorld only (testing_api_errors_test.cpp).
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include <tether/bootstrap.hpp>
#include <tether/error.hpp>

#include "testing_api_support.hpp"

namespace testing_api {
namespace mismatch {

using std::chrono::milliseconds;
using tether::Bootstrap;
using tether::ErrorCode;

inline std::string describe(const tether::Error& e) {
  return std::string(tether::toString(e.code())) + " peer() " + std::to_string(e.peer()) + ": " + e.what();
}

// Rank 2 broadcasts from root 0, which never calls (it waits in a receive
// that rank 2's failure, a world collective's, aborts); rank 1 thinks the
// root is 1 and sends. Rank 2 notices while it still waits on rank 0.
inline void noticedFromAPeerNotWaitedOn(Bootstrap& b) {
  b.setTimeout(milliseconds(5000));
  int data[3] = {0, 0, 0};
  if (b.rank() == 0) {
    const tether::Error e = errorFrom([&] { b.recv(data, sizeof(int), 2, 99); });
    check(e.code() == ErrorCode::Aborted && contains(e.what(), "aborted by rank 2"),
          "rank 0's receive ends with rank 2's abort: " + describe(e));
  } else if (b.rank() == 2) {
    const tether::Error e = errorFrom([&] { b.broadcast(data, sizeof(int), 0); });
    check(e.code() == ErrorCode::Protocol && e.peer() == 1 &&
              contains(e.what(), "rank 2: broadcast#1: rank 1 is in broadcast#1 with root 1, this rank's root is 0"),
          "rank 2 names rank 1 and both roots: " + describe(e));
  } else {
    try {
      b.broadcast(data, sizeof(int), 1);  // as the root it may be done before the abort
    } catch (const tether::Error& e) {
      check(e.code() == ErrorCode::Aborted, "rank 1 is at most aborted: " + describe(e));
    }
  }
}

// Rank 1 expects 6 bytes from rank 0, which sends 4: rank 1 fails with
// Protocol naming both sizes; rank 0's exchange is consistent, so it ends
// well or learns of the failure through the abort.
inline void alltoallvCountsDisagree(Bootstrap& b) {
  b.setTimeout(milliseconds(5000));
  unsigned char out[16] = {}, in[16] = {};
  std::size_t sendCounts[2] = {4, 4}, recvCounts[2] = {4, 4}, displs[2] = {0, 8};
  if (b.rank() == 1) {
    recvCounts[0] = 6;
    const tether::Error e = errorFrom([&] { b.alltoallv(out, sendCounts, displs, in, recvCounts, displs); });
    check(e.code() == ErrorCode::Protocol &&
              contains(e.what(),
                       "rank 1: alltoallv#1: rank 0 sent alltoallv#1 step 0 (4 bytes), this rank expects 6 bytes"),
          "rank 1 names both sizes: " + describe(e));
  } else {
    try {
      b.alltoallv(out, sendCounts, displs, in, recvCounts, displs);
    } catch (const tether::Error& e) {
      check(e.code() == ErrorCode::Aborted, "rank 0 is at most aborted: " + describe(e));
    }
  }
}

inline std::vector<Case> cases() {
  return {{"a mismatch is noticed even from a peer this rank is not waiting on", 3, noticedFromAPeerNotWaitedOn},
          {"alltoallv counts that disagree between sender and receiver are a Protocol error naming both", 2,
           alltoallvCountsDisagree}};
}

}  // namespace mismatch
}  // namespace testing_api
