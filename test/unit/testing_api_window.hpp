// The send-window scenarios (tether/detail/core/window.hpp), on any
// tether::Bootstrap: a sender whose peer does not receive stops at its
// window, fails at its deadline naming the window, and what it gave up on is
// never delivered; a held isend completes once the peer receives; a
// collective root stops at the collective window; the lanes are apart. Run
// with the other conformance scenarios over InProcessWorld and TcpBootstrap
// (testing_api_conformance_test.cpp): one rule, both worlds.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include <tether/bootstrap.hpp>
#include <tether/error.hpp>
#include <tether/request.hpp>

#include "testing_api_support.hpp"

namespace testing_api {
namespace window {

using std::chrono::milliseconds;
using tether::Bootstrap;
using tether::ErrorCode;

using testing_api::Case;

// 63 messages of 64 KiB fit in the default 4 MiB point-to-point window
// (payload plus 128 bytes each: 63 x 65,664 = 4,136,832); the 64th waits.
constexpr std::size_t kMessage = 64 * 1024;
constexpr int kFit = 63;

// Rank 0 sends until a send times out at the window; rank 1 first runs an
// all-gather (its frames pass the full point-to-point lane), then receives.
inline void senderStopsAtWindow(Bootstrap& b) {
  std::vector<int> msg(kMessage / sizeof(int));
  int token = 0;
  b.setTimeout(milliseconds(10000));
  if (b.rank() == 0) {
    b.setTimeout(milliseconds(1000));
    int sent = 0;
    const tether::Error e = errorFrom([&] {
      for (; sent < 1000; ++sent) {  // 62.5 MiB: far past the window (a peer without one holds it all)
        msg[0] = sent;
        b.send(msg.data(), kMessage, 1, 5);
      }
    });
    b.setTimeout(milliseconds(10000));
    check(e.code() == ErrorCode::Timeout && e.peer() == 1, std::string("the send past the window: ") + e.what());
    check(sent == kFit, std::to_string(kFit) + " messages fit in the window, " + std::to_string(sent) + " went");
    check(contains(e.what(), "rank 0: send to rank 1 tag 5: timed out waiting to send to rank 1") &&
              contains(e.what(),
                       ": it has not yet received 4136832 bytes of this rank's point-to-point messages, the most it "
                       "may hold (TETHER_P2P_WINDOW_BYTES=4194304, counting each message's payload plus 128 bytes)"),
          std::string("names the peer and the window: ") + e.what());
    int all[2] = {0, 0};
    b.allgather(all, sizeof(int));  // the collective lane is apart from the full point-to-point one
    b.send(&token, sizeof token, 1, 6);
    b.recv(&token, sizeof token, 1, 7);  // rank 1 has received the 63
    msg[0] = 100;
    b.send(msg.data(), kMessage, 1, 5);  // the window is open again
    return;
  }
  int all[2] = {0, 1};
  b.allgather(all, sizeof(int));
  b.recv(&token, sizeof token, 0, 6);
  for (int i = 0; i < kFit; ++i) {
    b.recv(msg.data(), kMessage, 0, 5);
    check(msg[0] == i, "message " + std::to_string(i) + " in order, got " + std::to_string(msg[0]));
  }
  b.send(&token, sizeof token, 0, 7);
  b.recv(msg.data(), kMessage, 0, 5);
  check(msg[0] == 100, "the send that timed out was dropped, never delivered; got " + std::to_string(msg[0]));
}

// A held isend is not done until the peer receives earlier messages; then
// every request completes and the messages arrive in order. (The peer is
// told to start with a barrier: a message to it would wait behind the held
// one, the lane is first in, first out.)
inline void heldIsendCompletes(Bootstrap& b) {
  b.setTimeout(milliseconds(10000));
  std::vector<std::vector<int>> msgs(kFit + 1, std::vector<int>(kMessage / sizeof(int)));
  if (b.rank() == 0) {
    std::vector<tether::Request> requests;
    for (int i = 0; i <= kFit; ++i) {
      msgs[static_cast<std::size_t>(i)][0] = i;
      requests.push_back(b.isend(msgs[static_cast<std::size_t>(i)].data(), kMessage, 1, 5));
    }
    check(!requests.back().test(), "the isend past the window is not done before the peer receives");
    b.barrier();
    for (auto& r : requests) r.wait();
    return;
  }
  b.barrier();
  std::vector<int> msg(kMessage / sizeof(int));
  for (int i = 0; i <= kFit; ++i) {
    b.recv(msg.data(), kMessage, 0, 5);
    check(msg[0] == i, "message " + std::to_string(i) + " in order, got " + std::to_string(msg[0]));
  }
}

// A receiver returns credit once a batch (16 KiB) is owed, in both worlds: a
// held isend stays held while the peer has received less than that, and
// goes once it has. 992 messages of 4 KiB fit (992 x 4,224 = 4,190,208).
inline void creditComesInBatches(Bootstrap& b) {
  b.setTimeout(milliseconds(10000));
  constexpr std::size_t kBytes = 4096;
  constexpr int kSmallFit = 992, kUnderBatch = 3;  // 3 x 4,224 = 12,672 < 16,384
  std::vector<std::vector<int>> msgs(kSmallFit + 1, std::vector<int>(kBytes / sizeof(int)));
  int token = 0;
  if (b.rank() == 0) {
    std::vector<tether::Request> requests;
    for (int i = 0; i <= kSmallFit; ++i) {
      msgs[static_cast<std::size_t>(i)][0] = i;
      requests.push_back(b.isend(msgs[static_cast<std::size_t>(i)].data(), kBytes, 1, 5));
    }
    check(!requests.back().test(), "the isend past the window is held");
    b.barrier();
    b.recv(&token, sizeof token, 1, 9);  // the peer has received 3 messages
    check(!requests.back().test(), "3 messages received (12,672 bytes) are less than a credit batch: still held");
    b.barrier();  // (the point-to-point lane to the peer is full; the collective one is apart)
    for (auto& r : requests) r.wait();
    return;
  }
  b.barrier();
  std::vector<int> msg(kBytes / sizeof(int));
  auto receive = [&](int i) {
    b.recv(msg.data(), kBytes, 0, 5);
    check(msg[0] == i, "message " + std::to_string(i) + " in order, got " + std::to_string(msg[0]));
  };
  for (int i = 0; i < kUnderBatch; ++i) receive(i);
  b.send(&token, sizeof token, 0, 9);
  b.barrier();  // the sender has looked
  for (int i = kUnderBatch; i <= kSmallFit; ++i) receive(i);
}

// A broadcast root whose peer never enters: 254 frames of 16 KiB fit in the
// 4 MiB collective window of one communicator (254 x 16,512 = 4,194,048); the
// 255th call fails at its deadline. On a child, so the world goes on.
inline void rootStopsAtCollectiveWindow(Bootstrap& b) {
  b.setTimeout(milliseconds(10000));
  auto child = b.split(0, b.rank());
  int token = 0;
  if (b.rank() == 1) {
    b.recv(&token, sizeof token, 0, 8);
    return;
  }
  constexpr std::size_t kBytes = 16 * 1024;
  std::vector<char> data(kBytes, 'x');
  child->setTimeout(milliseconds(1000));
  int done = 0;
  const tether::Error e = errorFrom([&] {
    for (; done < 4000; ++done) child->broadcast(data.data(), kBytes, 0);  // 62.5 MiB
  });
  check(e.code() == ErrorCode::Timeout, std::string("the broadcast past the window: ") + e.what());
  check(done == 254, "254 broadcasts fit in the window, " + std::to_string(done) + " went");
  check(contains(e.what(), "broadcast#255") && contains(e.what(), "timed out waiting to send to rank 1") &&
            contains(e.what(),
                     ": it has not yet received 4194048 bytes of this rank's collective frames on this "
                     "communicator, the most it may hold (4194304 bytes, counting each frame's payload plus 128 "
                     "bytes)"),
        std::string("names the peer and the window: ") + e.what());
  b.send(&token, sizeof token, 1, 8);
}

inline std::vector<Case> cases() {
  return {
      {"a sender whose peer does not receive stops at the point-to-point window, names it at its deadline, and "
       "the send it gave up is never delivered",
       2, senderStopsAtWindow},
      {"an isend past the point-to-point window completes once the peer receives", 2, heldIsendCompletes},
      {"a receiver returns credit once a batch is owed: a held isend stays held until then", 2, creditComesInBatches},
      {"a broadcast root whose peer has not entered stops at the collective window and names it", 2,
       rootStopsAtCollectiveWindow},
  };
}

}  // namespace window
}  // namespace testing_api
