// The nonblocking scenarios (tether/request.hpp), on any tether::Bootstrap:
// several requests outstanding at once, test() driving completion, cancel of
// an unmatched receive and of a collective, argument checks before a
// collective id. Run over forked TcpBootstrap ranks (test/multiproc/
// nonblocking_test.cpp, also with background progress) and, with the other
// conformance scenarios, over InProcessWorld and TcpBootstrap
// (testing_api_conformance_test.cpp): one contract, both worlds.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <tether/bootstrap.hpp>
#include <tether/error.hpp>
#include <tether/request.hpp>

#include "testing_api_support.hpp"

namespace testing_api {
namespace nonblocking {

using tether::Bootstrap;
using tether::ErrorCode;
using tether::Request;

using testing_api::Case;

inline bool has(const tether::Error& e, const std::string& part) { return contains(e.what(), part); }

inline void collectivesWhileIrecvPending(Bootstrap& b) {
  const int n = b.size(), r = b.rank();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  int got = -1;
  Request pending = b.irecv(&got, sizeof got, prev, 7);
  Request bar = b.ibarrier();
  std::vector<int> all(n, -1);
  all[r] = 100 + r;
  Request gather = b.iallgather(all.data(), sizeof(int));
  std::vector<int> out(n, -1), in(n);
  for (int i = 0; i < n; ++i) in[i] = r * 10 + i;
  Request a2a = b.ialltoall(in.data(), out.data(), sizeof(int));
  // A blocking collective while this thread's nonblocking ones are in
  // flight stays legal (docs/design.md, "Threads"): only a call made while
  // another thread's collective call is in progress is refused.
  b.barrier();
  // Waited for in the reverse order of starting: completion order is free.
  a2a.wait();
  gather.wait();
  bar.wait();
  for (int i = 0; i < n; ++i) {
    check(all[i] == 100 + i, "allgather block " + std::to_string(i));
    check(out[i] == i * 10 + r, "alltoall block " + std::to_string(i));
  }
  int mine = 1000 + r;
  Request s = b.isend(&mine, sizeof mine, next, 7);
  s.wait();
  pending.wait();
  check(got == 1000 + prev, "irecv payload");
  check(pending.test() && s.test(), "done requests stay done");
  b.barrier();  // the ids still agree after the nonblocking collectives
}

// Nonblocking collectives started back to back, none waited for until all
// are started: each must take its own frames, whichever runs first (in the
// in-process world each runs on a thread of its own). Repeated: a wrong order
// of their starts showed within 40 rounds in 9 runs of 10.
inline void backToBackKeepTheirIds(Bootstrap& b) {
  const int n = b.size(), r = b.rank();
  for (int round = 0; round < 100; ++round) {
    std::vector<int> all(n, -1), out(n, -1), in(n);
    all[r] = round * 100 + r;
    for (int i = 0; i < n; ++i) in[i] = round * 1000 + r * 10 + i;
    Request first = b.ialltoall(in.data(), out.data(), sizeof(int));
    Request second = b.ibarrier();
    Request third = b.iallgather(all.data(), sizeof(int));
    third.wait();
    second.wait();
    first.wait();
    for (int i = 0; i < n; ++i) {
      check(all[i] == round * 100 + i, "round " + std::to_string(round) + ": allgather block " + std::to_string(i));
      check(out[i] == round * 1000 + i * 10 + r,
            "round " + std::to_string(round) + ": alltoall block " + std::to_string(i));
    }
  }
}

inline void testAloneCompletes(Bootstrap& b) {
  const int n = b.size(), r = b.rank();
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = r * 10 + i;
  Request a2a = b.ialltoall(v.data(), v.data(), sizeof(int));
  int got = -1;
  Request rr;
  if (r == 1) rr = b.irecv(&got, sizeof got, 0, 3);
  if (r == 0) {
    int x = 77;
    b.send(&x, sizeof x, 1, 3);
  }
  // Polls with a pause: test() never blocks, the deadline only turns a hang into a failure.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!(a2a.test() & rr.test())) {
    check(std::chrono::steady_clock::now() < deadline, "requests done by test() before the deadline");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (int i = 0; i < n; ++i) check(v[i] == i * 10 + r, "in-place alltoall block " + std::to_string(i));
  if (r == 1) check(got == 77, "irecv payload via test()");
  b.barrier();
}

inline void cancelUnmatchedIrecv(Bootstrap& b) {
  if (b.rank() == 1) {
    int lost = -1;
    Request r = b.irecv(&lost, sizeof lost, 0, 3);
    check(r.cancel(), "cancel of an unmatched irecv");
    tether::Error e = errorFrom([&] { r.wait(); });
    check(e.code() == ErrorCode::Aborted, "cancelled irecv: Aborted");
    check(has(e, "rank 1") && has(e, "recv from rank 0 tag 3") && has(e, "cancelled"),
          std::string("message names rank, peer and operation: ") + e.what());
    check(!r.cancel(), "a second cancel does nothing");
    {
      int dropped = -1;
      Request d = b.irecv(&dropped, sizeof dropped, 0, 3);  // destroyed unmatched: cancelled
    }
  }
  b.barrier();  // the communicator is still usable
  if (b.rank() == 0) {
    int x = 42;
    b.send(&x, sizeof x, 1, 3);
  } else {
    int got = -1;
    b.recv(&got, sizeof got, 0, 3);  // neither the cancelled nor the destroyed irecv took it
    check(got == 42, "the next recv gets the message");
  }
  int y = 5;
  if (b.rank() == 0) {
    Request s = b.isend(&y, sizeof y, 1, 4);
    s.wait();
    check(!s.cancel(), "cancel of a completed isend");
  } else {
    int got = 0;
    b.recv(&got, sizeof got, 0, 4);
    check(got == 5, "isend payload");
  }
  b.barrier();
}

inline void cancelWorldCollective(Bootstrap& b) {
  if (b.rank() == 0) {
    std::vector<int> all(2, 0);
    Request g = b.iallgather(all.data(), sizeof(int));  // rank 1 never calls it
    check(g.cancel(), "cancel of a running collective");
    tether::Error e = errorFrom([&] { g.wait(); });
    check(e.code() == ErrorCode::Aborted && has(e, "allgather#1") && has(e, "cancelled"),
          std::string("cancelled collective: ") + e.what());
    tether::Error next = errorFrom([&] { b.barrier(); });
    check(has(next, "cancelled"), std::string("later collective names the cancel: ") + next.what());
  } else {
    int never = 0;
    tether::Error e = errorFrom([&] { b.recv(&never, sizeof never, 0, 9); });
    check(e.code() == ErrorCode::Aborted && has(e, "rank 0"), std::string("peer told: ") + e.what());
  }
}

// After its own abort, a rank's next nonblocking collective throws Aborted
// at once, as the blocking form does: no request for a call that cannot run.
inline void collectiveAfterAbortThrows(Bootstrap& b) {
  if (b.rank() == 0) {
    b.abort("stopping here");
    tether::Error e = errorFrom([&] { (void)b.ibarrier(); });
    check(e.code() == ErrorCode::Aborted, std::string("ibarrier after abort: ") + e.what());
  } else {
    int never = 0;
    tether::Error e = errorFrom([&] { b.recv(&never, sizeof never, 0, 9); });
    check(e.code() == ErrorCode::Aborted && has(e, "rank 0"), std::string("peer told: ") + e.what());
  }
}

inline void invalidArgumentsFirst(Bootstrap& b) {
  const int n = b.size();
  std::vector<int> buf(2 * n);
  tether::Error e = errorFrom([&] { (void)b.ialltoall(buf.data(), buf.data() + 1, sizeof(int)); });
  check(e.code() == ErrorCode::InvalidArgument, "overlap: InvalidArgument");
  tether::Error p = errorFrom([&] { (void)b.irecv(buf.data(), 4, n, 0); });
  check(p.code() == ErrorCode::InvalidArgument, "peer out of range: InvalidArgument");
  std::vector<int> all(n, -1);
  all[b.rank()] = b.rank();
  Request g = b.iallgather(all.data(), sizeof(int));
  g.wait(std::chrono::milliseconds(20000));
  for (int i = 0; i < n; ++i) check(all[i] == i, "allgather after rejected calls");
  tether::Error w = errorFrom([&] { g.wait(std::chrono::milliseconds(-1)); });
  check(w.code() == ErrorCode::InvalidArgument, "negative timeout: InvalidArgument");
  const std::string text = "rank " + std::to_string(b.rank()) +
                           ": allgather#1: Request::wait: negative timeout -1 ms (0 means the communicator's timeout)";
  check(w.what() == text, std::string("the same words in every world: '") + w.what() + "'");
}

// A request waited for and dropped on another thread while this thread
// starts the next collective at once: the communicator may reuse the
// dropped call's op for it only once the drop is ordered before the reuse
// (under TSan, use_count() == 1, a relaxed load, was not: the next call read
// op->active while the progress thread had written it). The handoff below
// is relaxed on purpose: it orders nothing.
inline void requestDroppedOnAnotherThread(Bootstrap& b) {
  const int n = b.size(), r = b.rank();
  std::vector<int> all(n), again(n);
  for (int round = 0; round < 100; ++round) {
    all.assign(n, -1);
    all[r] = round * 100 + r;
    std::atomic<bool> dropped{false};
    std::thread dropper([&, req = b.iallgather(all.data(), sizeof(int))]() mutable {
      req.wait();
      req = Request();
      dropped.store(true, std::memory_order_relaxed);
    });
    while (!dropped.load(std::memory_order_relaxed)) std::this_thread::yield();
    again.assign(n, -1);
    again[r] = round * 100 + 50 + r;
    b.allgather(again.data(), sizeof(int));
    dropper.join();
    for (int i = 0; i < n; ++i) {
      check(all[i] == round * 100 + i, "iallgather block " + std::to_string(i));
      check(again[i] == round * 100 + 50 + i, "allgather block " + std::to_string(i));
    }
  }
}

// Request::wait(milliseconds::max()) waits until the call ends: no deadline
// overflows (over TCP, now + max wrapped into the past and the wait gave up
// at once, the call still pending). Rank 0 answers late so that rank 1's
// waits are likely to block (nothing here is timed).
inline void waitWithTheLargestTimeout(Bootstrap& b) {
  const auto forever = std::chrono::milliseconds::max();
  const auto late = [] { std::this_thread::sleep_for(std::chrono::milliseconds(100)); };
  int value = -1, go = 1;
  if (b.rank() == 1) {
    Request r = b.irecv(&value, sizeof value, 0, 7);
    b.send(&go, sizeof go, 0, 8);
    r.wait(forever);
    check(value == 42, "irecv waited with the largest timeout: got " + std::to_string(value));
  } else {
    b.recv(&go, sizeof go, 1, 8);
    late();
    value = 42;
    b.send(&value, sizeof value, 1, 7);
    late();
  }
  std::vector<int> all = {-1, -1};
  all[static_cast<std::size_t>(b.rank())] = 10 + b.rank();
  Request g = b.iallgather(all.data(), sizeof(int));
  g.wait(forever);
  check(all[0] == 10 && all[1] == 11, "iallgather waited with the largest timeout");
}

// isends then a blocking send, all with one tag: the receiver gets them in
// the order they were called, also when the caller tests a request between
// them; and (odd rounds) irecvs, a test(), then a recv: they match in the
// order they were called.
inline void sendsKeepCallOrder(Bootstrap& b) {
  constexpr int kSends = 60;  // of 16 KiB: within the point-to-point window
  constexpr std::size_t kInts = 16 * 1024 / sizeof(int);
  b.setTimeout(std::chrono::milliseconds(20000));
  std::vector<std::vector<int>> values(kSends + 1, std::vector<int>(kInts));
  for (int round = 0; round < 20; ++round) {
    if (b.rank() == 0) {
      std::vector<Request> requests;
      for (int i = 0; i < kSends; ++i) {
        values[static_cast<std::size_t>(i)][0] = round * 1000 + i;
        requests.push_back(b.isend(values[static_cast<std::size_t>(i)].data(), kInts * sizeof(int), 1, 9));
      }
      (void)requests.back().test();  // a look at the last one between the calls
      values[kSends][0] = round * 1000 + kSends;
      b.send(values[kSends].data(), kInts * sizeof(int), 1, 9);
      for (auto& r : requests) r.wait();
    } else if (round % 2 == 0) {
      for (int i = 0; i <= kSends; ++i) {
        b.recv(values[0].data(), kInts * sizeof(int), 0, 9);
        check(values[0][0] == round * 1000 + i,
              "message " + std::to_string(round * 1000 + i) + " in call order, got " + std::to_string(values[0][0]));
      }
    } else {  // irecvs, a test(), then a recv: the n-th receive called gets the n-th message
      std::vector<Request> requests;
      for (int i = 0; i < kSends; ++i)
        requests.push_back(b.irecv(values[static_cast<std::size_t>(i)].data(), kInts * sizeof(int), 0, 9));
      (void)requests.back().test();
      b.recv(values[kSends].data(), kInts * sizeof(int), 0, 9);
      for (auto& r : requests) r.wait();
      for (int i = 0; i <= kSends; ++i)
        check(values[static_cast<std::size_t>(i)][0] == round * 1000 + i,
              "receive " + std::to_string(i) + " of round " + std::to_string(round) + " got message " +
                  std::to_string(values[static_cast<std::size_t>(i)][0]));
    }
    b.barrier();
  }
}

// A request fails at its communicator's deadline though nobody waits for it
// (test() only), the earliest first: an irecv on a child with a 0.8 s
// timeout, made after one on the world, fails within seconds; the world's is
// still pending (over TCP one timer serves all requests, RequestDeadlines).
inline void expiresWhileOnlyTested(Bootstrap& b) {
  auto child = b.split(0, b.rank());
  if (b.rank() == 1) {
    b.barrier();  // until rank 0 has looked
    return;
  }
  child->setTimeout(std::chrono::milliseconds(800));
  int late = 0, early = 0;
  Request onWorld = b.irecv(&late, sizeof late, 1, 1);
  Request onChild = child->irecv(&early, sizeof early, 1, 1);
  const auto start = std::chrono::steady_clock::now();
  std::string error;
  while (error.empty() && std::chrono::steady_clock::now() - start < std::chrono::seconds(20)) {
    try {
      check(!onChild.test(), "nothing was sent to rank 0");
    } catch (const tether::Error& e) {
      check(e.code() == ErrorCode::Timeout && e.peer() == 1, std::string("a Timeout naming rank 1: ") + e.what());
      check(has(e, "recv from rank 1 tag 1") && has(e, "timed out"), std::string("names the call: ") + e.what());
      error = e.what();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const auto took = std::chrono::steady_clock::now() - start;
  check(!error.empty() && took < std::chrono::seconds(10),
        "the child's irecv failed within seconds of its 0.8 s deadline");
  check(!onWorld.test(), "the world's irecv is still pending");
  check(onWorld.cancel(), "and can be cancelled");
  b.barrier();
}

// A request fails at its deadline though nobody looks at it: an irecv
// whose message comes only after its deadline does not take it (the message
// waits for the next receive, the irecv's buffer is untouched), and a later
// test() throws the Timeout. Before 2026-12-07 the in-process world failed a
// request only when it was looked at, so the late message filled the expired
// irecv and test() returned true; over TCP the progress thread fails it.
inline void expiresUnobserved(Bootstrap& b) {
  int token = 0;
  if (b.rank() == 1) {
    b.recv(&token, sizeof token, 0, 8);  // rank 0's irecv is past its deadline
    int value = 42;
    b.send(&value, sizeof value, 0, 7);
    b.send(&token, sizeof token, 0, 9);
    b.barrier();
    return;
  }
  b.setTimeout(std::chrono::milliseconds(300));
  int got = -1;
  Request late = b.irecv(&got, sizeof got, 1, 7);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // not looking
  b.setTimeout(std::chrono::milliseconds(20000));
  b.send(&token, sizeof token, 1, 8);
  b.recv(&token, sizeof token, 1, 9);  // sent after the tag-7 message: that one is here
  const tether::Error e = errorFrom([&] { late.test(); });
  check(e.code() == ErrorCode::Timeout && has(e, "recv from rank 1 tag 7") && has(e, "timed out"),
        std::string("the expired irecv's Timeout: ") + e.what());
  check(got == -1, "the expired irecv's buffer was filled: " + std::to_string(got));
  b.recv(&got, sizeof got, 1, 7);
  check(got == 42, "the next receive takes the late message: " + std::to_string(got));
  b.barrier();
}

// A collective request that failed leaves its communicator unusable at
// once, as a blocking collective's failure does (tether/bootstrap.hpp),
// though nobody waited for it or tested it: cancelled (on a child: no world
// abort), or past its deadline unobserved. The next collective is refused
// with Protocol naming that failure; it takes no id and sends nothing.
// Before 2026-12-07 TCP marked the communicator only once the request was
// waited for or tested: the next collective took the next id and ran (here,
// to its deadline: a Timeout).
inline void failedRequestBreaksItsCommunicator(Bootstrap& b) {
  auto cancelledOn = b.split(0, b.rank());
  auto expiredOn = b.split(0, b.rank());
  if (b.rank() == 0) {  // rank 1 calls no collective of either child
    cancelledOn->setTimeout(std::chrono::milliseconds(300));
    Request cancelled = cancelledOn->ibarrier();
    check(cancelled.cancel(), "cancel of a running collective");
    const tether::Error afterCancel = errorFrom([&] { cancelledOn->barrier(); });
    check(afterCancel.code() == ErrorCode::Protocol && has(afterCancel, "unusable") &&
              has(afterCancel, "cancelled on this rank"),
          std::string("the collective after a cancelled one: ") + afterCancel.what());

    expiredOn->setTimeout(std::chrono::milliseconds(300));
    Request expired = expiredOn->ibarrier();
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // not looking
    const tether::Error afterExpiry = errorFrom([&] { expiredOn->barrier(); });
    check(afterExpiry.code() == ErrorCode::Protocol && has(afterExpiry, "unusable") && has(afterExpiry, "timed out"),
          std::string("the collective after one that expired unobserved: ") + afterExpiry.what());
  }
  b.barrier();
}

// An abort fails every call in flight at once, a request nobody looks at
// too (as TCP's progress thread does): rank 0's world ibarrier, which rank 1
// never joins, ends with rank 1's abort, so rank 0's next collective is
// refused naming it, and the request's own error is the abort. Before
// 2026-12-07 the in-process world failed such a request only when it was
// looked at: the next collective there said Aborted, over TCP Protocol.
inline void abortEndsAnUnobservedRequest(Bootstrap& b) {
  if (b.rank() == 1) {
    int token = 0;
    b.recv(&token, sizeof token, 0, 3);  // rank 0's ibarrier has started
    b.abort("rank 1 stops the job");
    return;
  }
  Request pending = b.ibarrier();
  int token = 1;
  b.send(&token, sizeof token, 1, 3);
  const tether::Error told = errorFrom([&] { b.recv(&token, sizeof token, 1, 4); });  // until the abort is here
  check(told.code() == ErrorCode::Aborted, std::string("the abort: ") + told.what());
  const tether::Error next = errorFrom([&] { b.barrier(); });
  check(next.code() == ErrorCode::Protocol && has(next, "unusable") && has(next, "barrier#1") &&
            has(next, "aborted by rank 1: rank 1 stops the job"),
        std::string("the collective after the aborted request: ") + next.what());
  const tether::Error own = errorFrom([&] { pending.wait(); });
  check(own.code() == ErrorCode::Aborted && has(own, "barrier#1") && has(own, "aborted by rank 1"),
        std::string("the request's own error: ") + own.what());
}

// A peer that leaves fails every call waiting on it at once, a request
// nobody looks at too (as a TCP rank's calls fail when a peer closes its
// bootstrap): rank 0's world ibarrier, which rank 1 never joins, ends when
// rank 1 returns; its failure, a world collective's PeerLost, leaves the
// communicator unusable, so rank 0's next collective is refused naming it.
// Before 2026-12-07 the in-process world failed such a request only when it
// was looked at: the next collective there ran, and failed PeerLost itself.
inline void leavingPeerEndsAnUnobservedRequest(Bootstrap& b) {
  int token = 0;
  if (b.rank() == 1) {
    b.recv(&token, sizeof token, 0, 3);  // rank 0's ibarrier has started
    return;                              // leaves: a TcpBootstrap is closed, an in-process rank has left
  }
  Request pending = b.ibarrier();
  b.send(&token, sizeof token, 1, 3);
  const tether::Error gone = errorFrom([&] { b.recv(&token, sizeof token, 1, 4); });  // until rank 1 has left
  check(gone.code() == ErrorCode::PeerLost || gone.code() == ErrorCode::Aborted,
        std::string("rank 1 left: ") + gone.what());
  const tether::Error next = errorFrom([&] { b.barrier(); });
  check(
      next.code() == ErrorCode::Protocol && has(next, "unusable") && has(next, "barrier#1") && has(next, "lost rank 1"),
      std::string("the collective after the request rank 1 left: ") + next.what());
  const tether::Error own = errorFrom([&] { pending.wait(); });
  check(own.code() == ErrorCode::PeerLost && has(own, "barrier#1") && has(own, "lost rank 1"),
        std::string("the request's own error: ") + own.what());
}

inline std::vector<Case> cases() {
  return {
      {"nonblocking: ibarrier, iallgather and ialltoall while an irecv is pending", 4, collectivesWhileIrecvPending},
      {"nonblocking: ialltoall, ibarrier and iallgather started back to back, 100 times: each takes its own frames", 4,
       backToBackKeepTheirIds},
      {"nonblocking: test() alone completes an irecv and an in-place ialltoall", 3, testAloneCompletes},
      {"nonblocking: cancel withdraws an unmatched irecv cleanly", 2, cancelUnmatchedIrecv},
      {"nonblocking: cancelling a world collective poisons it and tells the peers", 2, cancelWorldCollective},
      {"nonblocking: a collective started after this rank aborted throws Aborted at once", 2,
       collectiveAfterAbortThrows},
      {"nonblocking: invalid arguments throw before a collective id is taken", 3, invalidArgumentsFirst},
      {"nonblocking: a request dropped on another thread while the next collective starts", 3,
       requestDroppedOnAnotherThread},
      {"nonblocking: wait with the largest timeout waits for the call", 2, waitWithTheLargestTimeout},
      {"nonblocking: isends and a send with one tag arrive in the order they were called", 2, sendsKeepCallOrder},
      {"nonblocking: an irecv fails at its communicator's deadline though only tested: the earliest first", 2,
       expiresWhileOnlyTested},
      {"nonblocking: an irecv nobody looks at fails at its deadline: a message that comes later waits for the next "
       "receive",
       2, expiresUnobserved},
      {"nonblocking: a collective request that failed unobserved (cancelled, or past its deadline) leaves its "
       "communicator unusable at once",
       2, failedRequestBreaksItsCommunicator},
      {"nonblocking: an abort fails a collective request nobody looks at, at once", 2, abortEndsAnUnobservedRequest},
      {"nonblocking: a peer that leaves fails a collective request waiting on it, at once", 2,
       leavingPeerEndsAnUnobservedRequest},
  };
}

}  // namespace nonblocking
}  // namespace testing_api
