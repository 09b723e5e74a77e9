// The same scenarios, asserted inside the rank bodies, run over InProcessWorld
// (threads) and over TcpBootstrap (forked ranks): the testing API must keep the
// contract of the real implementation — contents, matching, error codes.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <tether/tcp_bootstrap.hpp>
#include <tether/testing/in_process.hpp>

#include "multiproc.hpp"
#include "testing_api_child_names.hpp"
#include "testing_api_edges.hpp"
#include "testing_api_mismatch.hpp"
#include "testing_api_nonblocking.hpp"
#include "testing_api_support.hpp"
#include "testing_api_window.hpp"

using std::chrono::milliseconds;
using testing_api::check;
using testing_api::contains;
using testing_api::errorFrom;
using testing_api::p2pRendezvous;
using tether::Bootstrap;
using tether::ErrorCode;
using tether::testing::InProcessWorld;

namespace {

struct Scenario {
  std::string name;
  int nranks;
  std::function<void(Bootstrap&)> body;  // throws when the rank sees something unexpected
  const char* maxPayload = nullptr;      // TETHER_MAX_PAYLOAD_BYTES while the world is made, if set
};

// TETHER_MAX_PAYLOAD_BYTES set while a scenario's world is made (both worlds read it then).
struct MaxPayload {
  explicit MaxPayload(const char* value) : set(value != nullptr) {
    if (set) ::setenv("TETHER_MAX_PAYLOAD_BYTES", value, 1);
  }
  ~MaxPayload() {
    if (set) ::unsetenv("TETHER_MAX_PAYLOAD_BYTES");
  }
  bool set;
};

void expectCode(const tether::Error& e, ErrorCode code, const std::string& what) {
  check(e.code() == code, what + ": unexpected error code, message: " + e.what());
}

// 2 ranks, TETHER_MAX_PAYLOAD_BYTES = 64 KiB: an all-gather of 150,000 B
// blocks goes in parts and arrives whole; then the ranks disagree on a
// broadcast's size, and rank 1 receives the root's first part (64 KiB), not
// its whole 100,000 bytes, where it expects 40,000.
void partsPastMaxPayload(Bootstrap& b) {
  constexpr std::size_t kBlock = 150000;
  std::vector<unsigned char> all(2 * kBlock);
  for (std::size_t i = 0; i < kBlock; ++i) all[b.rank() * kBlock + i] = static_cast<unsigned char>(b.rank() + i);
  b.allgather(all.data(), kBlock);
  for (int r = 0; r < 2; ++r)
    for (std::size_t i = 0; i < kBlock; i += 997)
      check(all[r * kBlock + i] == static_cast<unsigned char>(r + i), "allgather block " + std::to_string(r));
  b.setTimeout(milliseconds(5000));
  std::vector<unsigned char> data(b.rank() == 0 ? 100000 : 40000);
  if (b.rank() == 0) {  // it sends both parts; it may hear of rank 1's failure (the world aborts)
    try {
      b.broadcast(data.data(), data.size(), 0);
    } catch (const tether::Error& e) {
      expectCode(e, ErrorCode::Aborted, "the root, told of rank 1's failure");
    }
    return;
  }
  auto e = errorFrom([&] { b.broadcast(data.data(), data.size(), 0); });
  expectCode(e, ErrorCode::Protocol, "a broadcast of another size");
  check(contains(e.what(),
                 "rank 1: broadcast#2: rank 0 sent broadcast#2 step 0 (65536 bytes), this rank expects 40000 bytes"),
        std::string("names the part it received: ") + e.what());
}

// A mismatch ends the world, over TCP and in process alike: each rank sees
// Protocol itself, or Aborted carrying the noticing rank's Protocol text (a
// broadcast root that only sent may return and learn it on its next call).
void expectMismatchEndsWorld(Bootstrap& b, const std::function<void()>& call, bool mayReturn) {
  b.setTimeout(milliseconds(2000));
  const std::string other = std::to_string(1 - b.rank());
  try {
    call();
    check(mayReturn, "the mismatched collective returned");
  } catch (const tether::Error& e) {
    if (e.code() == ErrorCode::Protocol) {
      check(e.rank() == b.rank() && e.peer() == 1 - b.rank(), std::string("rank and peer set: ") + e.what());
      check(contains(e.what(), "allgather"), std::string("names the operation: ") + e.what());
    } else {
      check(e.code() == ErrorCode::Aborted && contains(e.what(), "aborted by rank " + other) &&
                contains(e.what(), "allgather"),
            std::string("not Protocol, so Aborted by the noticing rank: ") + e.what());
    }
  }
  // The world is aborted: a receive nobody serves ends with Aborted, not its deadline.
  int value = 0;
  auto after = errorFrom([&] { b.recv(&value, sizeof value, 1 - b.rank(), 77); });
  expectCode(after, ErrorCode::Aborted, "a receive after the mismatch");
}

// The two threads of a rank meet before each call, so that their calls
// overlap (unsynchronised, one thread often ran all its calls first).
class Meeting {
 public:
  void meet() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (over_) return;
    const long round = round_;
    if (++arrived_ == 2) {
      arrived_ = 0;
      ++round_;
      wake_.notify_all();
      return;
    }
    wake_.wait(lock, [&] { return round_ != round || over_; });
  }
  void leave() {
    std::lock_guard<std::mutex> lock(mutex_);
    over_ = true;
    wake_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable wake_;
  int arrived_ = 0;
  long round_ = 0;
  bool over_ = false;
};

// One rank of "two threads, 30 all-gathers each, on one communicator": the
// threads' calls have no order every rank shares. Before the check no call
// failed and results held the peer's other thread's payload; now a rank
// whose threads' calls met reports it — InvalidArgument to the caller, then
// the abort (naming it) of every rank — and no result is wrong in silence.
void twoThreadsOnOneCommunicator(Bootstrap& b) {
  constexpr int kCalls = 30;
  const int me = b.rank(), peer = 1 - me;
  b.setTimeout(milliseconds(10000));  // a misuse must not hang a test
  std::mutex mutex;
  std::vector<std::string> errors;
  int done = 0, wrong = 0;
  Meeting meeting;
  auto caller = [&](int thread) {
    for (int i = 0; i < kCalls; ++i) {
      meeting.meet();
      std::vector<int> all(2, -1);
      all[static_cast<std::size_t>(me)] = me * 10 + thread;
      try {
        b.allgather(all.data(), sizeof(int));
      } catch (const tether::Error& e) {
        {
          std::lock_guard<std::mutex> lock(mutex);
          errors.push_back(std::string(tether::toString(e.code())) + ": " + e.what());
        }
        if (e.code() == ErrorCode::InvalidArgument) b.abort(std::string("misuse: ") + e.what());
        meeting.leave();
        return;
      }
      std::lock_guard<std::mutex> lock(mutex);
      ++done;
      if (all[static_cast<std::size_t>(peer)] != peer * 10 + thread) ++wrong;
    }
    meeting.leave();
  };
  std::thread first(caller, 0), second(caller, 1);
  first.join();
  second.join();
  check(!errors.empty() || wrong == 0, "no error, and " + std::to_string(wrong) + " of " + std::to_string(done) +
                                           " results hold the peer's other thread's payload");
  if (errors.empty()) return;  // the calls never met here or on the peer
  bool named = false;
  for (const auto& e : errors) {
    if (contains(e, "called while allgather") && contains(e, "give each thread its own communicator (split())"))
      named = true;
    check(!contains(e, "InvalidArgument") || contains(e, "(split())"), "an InvalidArgument without the rule: " + e);
  }
  check(named, "no error names the misuse: " + errors.front());
}

// One rank of "ranks that disagree on a broadcast's root": each calls
// broadcast with the root `roots[rank]` gives it. Over TCP a frame did not
// name its root, so a receive took a frame of the other root's broadcast
// with the same step and source: with roots {1, 1, 3, 3} ranks 0 and 2
// returned the other root's payload, no rank failed. Now no rank returns
// another root's payload; a rank that notices fails with Protocol naming
// both roots, the others with Aborted (the world collective failed).
void disagreeOnRoot(Bootstrap& b, const std::vector<int>& roots) {
  b.setTimeout(milliseconds(10000));
  const int root = roots[static_cast<std::size_t>(b.rank())];
  std::vector<int> value(4, b.rank() == root ? b.rank() * 100 + 7 : -1);
  try {
    b.broadcast(value.data(), value.size() * sizeof(int), root);
    check(value[0] == root * 100 + 7, "rank " + std::to_string(b.rank()) + " returned " + std::to_string(value[0]) +
                                          ", not root " + std::to_string(root) + "'s payload");
  } catch (const tether::Error& e) {
    const bool protocol = e.code() == ErrorCode::Protocol && contains(e.what(), "root");
    check(protocol || e.code() == ErrorCode::Aborted,
          std::string("Protocol naming the roots, or Aborted: ") + e.what());
  }
}

std::vector<Scenario> scenarios() {
  std::vector<Scenario> list;
  list.push_back({"collective and point-to-point contents", 3, [](Bootstrap& b) {
                    const int n = b.size(), me = b.rank();
                    std::vector<int> all(n, -1);
                    all[me] = me + 10;
                    b.allgather(all.data(), sizeof(int));
                    for (int r = 0; r < n; ++r) check(all[r] == r + 10, "allgather content");
                    std::vector<int> out(n), in(n, -1);
                    for (int r = 0; r < n; ++r) out[r] = me * 100 + r;
                    b.alltoall(out.data(), in.data(), sizeof(int));
                    for (int r = 0; r < n; ++r) check(in[r] == r * 100 + me, "alltoall content");
                    int value = me == 2 ? 77 : 0;
                    b.broadcast(&value, sizeof value, 2);
                    check(value == 77, "broadcast content");
                    b.barrier();
                    if (me == 0) {
                      for (int tag : {5, 6}) b.send(&tag, sizeof tag, 1, tag);
                    } else if (me == 1) {
                      int got = 0;
                      b.recv(&got, sizeof got, 0, 6);
                      check(got == 6, "tag 6 first");
                      b.recv(&got, sizeof got, 0, 5);
                      check(got == 5, "tag 5 second");
                    }
                    b.barrier();
                  }});
  list.push_back({"split by (key, parent rank), kNoColor gives nullptr", 4, [](Bootstrap& b) {
                    auto child = b.split(b.rank() == 3 ? Bootstrap::kNoColor : 0, b.rank() == 0 ? 9 : 1);
                    if (b.rank() == 3) {
                      check(child == nullptr, "kNoColor -> nullptr");
                    } else {
                      check(child && child->size() == 3, "child size");
                      const int expected[] = {2, 0, 1};  // key 9 sorts last; equal keys by parent rank
                      check(child->rank() == expected[b.rank()], "child rank");
                      std::vector<int> all(3, -1);
                      all[child->rank()] = b.rank();
                      child->allgather(all.data(), sizeof(int));
                      check(all == std::vector<int>({1, 2, 0}), "child allgather");
                    }
                    b.barrier();
                  }});
  list.push_back({"subset barrier does not consume a collective id", 3, [](Bootstrap& b) {
                    if (b.rank() != 1) b.barrier({2, 0});
                    int all[3] = {0, 0, 0};
                    all[b.rank()] = b.rank() + 1;
                    b.allgather(all, sizeof(int));
                    check(all[0] == 1 && all[1] == 2 && all[2] == 3, "allgather after subset barrier");
                  }});
  list.push_back({"different collectives at one id: Protocol, then the world is aborted", 2, [](Bootstrap& b) {
                    std::vector<unsigned char> buffer(64);
                    expectMismatchEndsWorld(
                        b,
                        [&] {
                          if (b.rank() == 0)
                            b.broadcast(buffer.data(), 64, 0);
                          else
                            b.allgather(buffer.data(), 32);
                        },
                        /*mayReturn=*/b.rank() == 0);
                  }});
  list.push_back({"one collective with different sizes: Protocol, then the world is aborted", 2, [](Bootstrap& b) {
                    std::vector<unsigned char> buffer(64);
                    expectMismatchEndsWorld(
                        b, [&] { b.allgather(buffer.data(), b.rank() == 0 ? 32 : 16); }, /*mayReturn=*/false);
                  }});
  list.push_back({"send/recv size mismatch: Protocol", 2, [](Bootstrap& b) {
                    b.setTimeout(milliseconds(5000));
                    std::uint64_t word = 1;
                    if (b.rank() == 0) {
                      b.send(&word, sizeof word, 1, 3);
                    } else {
                      unsigned char big[16];
                      auto e = errorFrom([&] { b.recv(big, sizeof big, 0, 3); });
                      expectCode(e, ErrorCode::Protocol, "p2p size mismatch");
                      check(contains(e.what(), "8") && contains(e.what(), "16"),
                            std::string("names both sizes: ") + e.what());
                    }
                    p2pRendezvous(b, 42);
                  }});
  list.push_back(
      {"a rank that never calls: Timeout, then the world is aborted", 3, [](Bootstrap& b) {
         b.setTimeout(milliseconds(200));
         int value = 0;
         if (b.rank() != 2) {
           int all[3] = {};
           auto e = errorFrom([&] { b.allgather(all, sizeof(int)); });
           // The first rank to time out aborts the world; the other may see that first.
           check(e.code() == ErrorCode::Timeout || (e.code() == ErrorCode::Aborted && contains(e.what(), "timed out")),
                 std::string("allgather without rank 2: ") + e.what());
           check(contains(e.what(), "rank " + std::to_string(b.rank())) && contains(e.what(), "allgather"),
                 std::string("names rank and op: ") + e.what());
         }
         b.setTimeout(milliseconds(5000));
         auto after = errorFrom([&] { b.recv(&value, sizeof value, (b.rank() + 1) % 3, 43); });
         expectCode(after, ErrorCode::Aborted, "a receive after the failed world collective");
         check(contains(after.what(), "timed out"), std::string("the abort carries the timeout: ") + after.what());
       }});
  list.push_back({"a failed child collective does not abort the world", 3, [](Bootstrap& b) {
                    b.setTimeout(milliseconds(5000));
                    auto child = b.split(b.rank() == 2 ? Bootstrap::kNoColor : 0, 0);
                    if (child) {
                      // Over TCP the rank that notices first withdraws its unsent frame; its
                      // peer then only sees its deadline pass (a child's failure is not
                      // propagated as an abort).
                      child->setTimeout(milliseconds(300));
                      std::vector<unsigned char> buffer(64);
                      auto e = errorFrom([&] { child->allgather(buffer.data(), child->rank() == 0 ? 8 : 4); });
                      check(e.code() == ErrorCode::Protocol || e.code() == ErrorCode::Timeout,
                            std::string("child allgather with different sizes: ") + e.what());
                    }
                    int all[3] = {0, 0, 0};
                    all[b.rank()] = b.rank() + 1;
                    b.allgather(all, sizeof(int));
                    check(all[0] + all[1] + all[2] == 6, "world allgather after the child failed");
                  }});
  list.push_back(
      {"abort reaches the other rank; later calls fail too", 2, [](Bootstrap& b) {
         b.setTimeout(milliseconds(5000));
         int value = 0;
         if (b.rank() == 0) {
           std::this_thread::sleep_for(milliseconds(50));
           b.abort("stop now");
           expectCode(errorFrom([&] { b.barrier(); }), ErrorCode::Aborted, "call after own abort");
         } else {
           auto e = errorFrom([&] { b.recv(&value, sizeof value, 0, 0); });
           expectCode(e, ErrorCode::Aborted, "recv while rank 0 aborts");
           check(contains(e.what(), "stop now") && e.peer() == 0, std::string("names reason and peer: ") + e.what());
           expectCode(errorFrom([&] { b.send(&value, sizeof value, 0, 0); }), ErrorCode::Aborted, "later send");
         }
       }});
  list.push_back(
      {"an abort whose reason is longer than a control frame still reaches the other rank", 2, [](Bootstrap& b) {
         b.setTimeout(milliseconds(5000));
         int value = 0;
         const std::string reason = "long reason " + std::string(100000, 'x');
         if (b.rank() == 0) {
           std::this_thread::sleep_for(milliseconds(50));
           b.abort(reason);
           expectCode(errorFrom([&] { b.barrier(); }), ErrorCode::Aborted, "call after own abort");
         } else {
           auto e = errorFrom([&] { b.recv(&value, sizeof value, 0, 0); });
           expectCode(e, ErrorCode::Aborted, "recv while rank 0 aborts");
           // Its first 4 KiB, the mark of the cut included, whichever rank it passed.
           const std::string what = e.what();
           check(contains(what, "aborted by rank 0: long reason xxx") && contains(what, "x [cut from 100012 bytes]") &&
                     what.size() < 4500 && e.peer() == 0,
                 "names the reason's start, the cut and the peer: " + what.substr(0, 200) + " ... " +
                     what.substr(what.size() > 100 ? what.size() - 100 : 0));
         }
       }});
  list.push_back(
      {"invalid arguments: InvalidArgument with the same words, no collective id consumed", 2, [](Bootstrap& b) {
         int value = 0;
         const std::string me = "rank " + std::to_string(b.rank()) + ": ";
         auto invalid = [](const tether::Error& e, const std::string& text) {
           expectCode(e, ErrorCode::InvalidArgument, text);
           check(std::string(e.what()) == text, std::string("message '") + e.what() + "' is not '" + text + "'");
         };
         invalid(errorFrom([&] { b.send(&value, sizeof value, 2, 0); }), me + "send: peer 2 is out of range [0, 2)");
         invalid(errorFrom([&] { b.recv(&value, sizeof value, -1, 0); }), me + "recv: peer -1 is out of range [0, 2)");
         invalid(errorFrom([&] { b.send(&value, sizeof value, 0, -1); }), me + "send: negative tag -1");
         invalid(errorFrom([&] { b.recv(nullptr, 4, 0, 0); }), me + "recv: null buffer for 4 bytes");
         invalid(errorFrom([&] { b.allgather(nullptr, 4); }), me + "allgather: null buffer for 4 bytes");
         invalid(errorFrom([&] { b.broadcast(&value, sizeof value, 2); }),
                 me + "broadcast: root 2 is out of range [0, 2)");
         invalid(errorFrom([&] { b.barrier({1 - b.rank()}); }),
                 me + "subset barrier: the list does not contain this rank");
         invalid(errorFrom([&] { b.barrier({0, 1, 1}); }), me + "subset barrier: duplicate rank in the list");
         invalid(errorFrom([&] { b.split(-7, 0); }), me + "split: negative color -7");
         invalid(errorFrom([&] { b.setTimeout(milliseconds(-5)); }),
                 me + "setTimeout: negative timeout -5 ms (0 means the default: TETHER_TIMEOUT_MS, else 300000 ms)");
         std::vector<int> buffer(8);
         invalid(errorFrom([&] { b.alltoall(buffer.data(), buffer.data() + 1, sizeof(int)); }),
                 me + "alltoall: send and receive buffers overlap (pass the same pointer for in place)");
         std::size_t counts[2] = {4, 4}, displs[2] = {0, 4}, recvCounts[2] = {4, 4};
         recvCounts[b.rank()] = 8;  // its own block: 4 bytes out, 8 expected back
         std::vector<unsigned char> out(16), in(16);
         invalid(errorFrom([&] { b.alltoallv(out.data(), counts, displs, in.data(), recvCounts, displs); }),
                 me + "alltoallv: this rank sends itself 4 bytes but expects 8");
         invalid(errorFrom([&] { b.alltoallv(out.data(), counts, displs, out.data() + 4, counts, displs); }),
                 me + "alltoallv: send and receive buffers overlap");
         int all[2] = {0, 0};
         all[b.rank()] = 5 + b.rank();
         b.allgather(all, sizeof(int));
         check(all[0] == 5 && all[1] == 6, "allgather after rejected calls");
       }});
  list.push_back({"alltoall in place returns every block (4 B and 100 kB blocks)", 4, [](Bootstrap& b) {
                    const int n = b.size(), me = b.rank();
                    for (std::size_t bytes : {std::size_t(4), std::size_t(100 * 1000)}) {
                      std::vector<unsigned char> buf(bytes * static_cast<std::size_t>(n));
                      for (int to = 0; to < n; ++to)
                        for (std::size_t i = 0; i < bytes; ++i)
                          buf[static_cast<std::size_t>(to) * bytes + i] = testing_api::pattern(me, to, i);
                      b.alltoall(buf.data(), buf.data(), bytes);
                      for (int from = 0; from < n; ++from)
                        for (std::size_t i = 0; i < bytes; ++i)
                          check(buf[static_cast<std::size_t>(from) * bytes + i] == testing_api::pattern(from, me, i),
                                "in-place alltoall block from rank " + std::to_string(from) + " (" +
                                    std::to_string(bytes) + " B)");
                    }
                  }});
  list.push_back(
      {"topology of one host: one node, local rank = rank, a node split keeps everyone", 3, [](Bootstrap& b) {
         const int me = b.rank();
         check(
             b.worldRank() == me && b.nnodes() == 1 && b.nodeId() == 0 && b.localRank() == me && b.nranksPerNode() == 3,
             "topology of one host");
         for (int p = 0; p < 3; ++p) {
           check(b.peerHost(p) == b.peerHost(me), "one host for all");
           check(p == me || b.peerAddress(p) != b.peerAddress(me), "one address per rank");
         }
         auto e = errorFrom([&] { (void)b.peerHost(3); });
         expectCode(e, ErrorCode::InvalidArgument, "peerHost out of range");
         check(std::string(e.what()) == "rank " + std::to_string(me) + ": peerHost: peer 3 is out of range [0, 3)",
               std::string("peerHost message: ") + e.what());
         auto node = b.splitByNode();
         check(node && node->size() == 3 && node->rank() == me && node->worldRank() == me, "splitByNode");
         auto odd = b.split(me % 2, 0);
         check(odd->worldRank() == me && odd->localRank() == odd->rank(), "a child's topology");
       }});
  list.push_back({"a timeout names the operation, the step and the rank waited for", 2, [](Bootstrap& b) {
                    b.setTimeout(milliseconds(300));
                    if (b.rank() == 1) {
                      int value = 0;
                      b.setTimeout(milliseconds(5000));
                      auto e = errorFrom([&] { b.recv(&value, sizeof value, 0, 9); });
                      expectCode(e, ErrorCode::Aborted, "the rank that never called");
                      return;
                    }
                    auto e = errorFrom([&] { b.barrier(); });
                    expectCode(e, ErrorCode::Timeout, "barrier without rank 1");
                    check(contains(e.what(), "rank 0: barrier#1: timed out waiting for step 0 from rank 1"),
                          std::string("timeout text: ") + e.what());
                    check(e.peer() == 1, "peer() names the rank waited for");
                  }});
  list.push_back({"a collective while another thread's collective is in flight fails at once, naming both and split()",
                  2, [](Bootstrap& b) {
                    const int me = b.rank();
                    if (me == 1) {
                      int go = 0;
                      b.recv(&go, sizeof go, 0, 41);  // rank 0 has seen the refusal
                      std::vector<int> all = {-1, 11};
                      b.allgather(all.data(), sizeof(int));
                      check(all[0] == 10, "rank 1's allgather pairs with rank 0's call that went ahead");
                    } else {
                      // Rank 1 joins only once the second call was refused: the
                      // first stays in flight meanwhile, whichever thread it is.
                      std::vector<int> mine = {10, -1}, other = {10, -1};
                      std::string refused;
                      auto call = [&](std::vector<int>& buf) {
                        try {
                          b.allgather(buf.data(), sizeof(int));
                          return true;
                        } catch (const tether::Error& e) {
                          refused = e.what();
                          expectCode(e, ErrorCode::InvalidArgument, "the concurrent collective");
                          int go = 1;
                          b.send(&go, sizeof go, 1, 41);  // point-to-point from any thread stays allowed
                          return false;
                        }
                      };
                      bool threadOk = false;
                      std::thread thread([&] { threadOk = call(mine); });
                      std::this_thread::sleep_for(milliseconds(100));
                      const bool mainOk = call(other);
                      thread.join();
                      check(threadOk != mainOk, "exactly one of the two calls is refused");
                      check(contains(refused, "rank 0: allgather: called while allgather") &&
                                contains(refused,
                                         "of this communicator is in flight on this rank (another thread's "
                                         "call)") &&
                                contains(refused, "give each thread its own communicator (split())"),
                            "refusal text: " + refused);
                      check((threadOk ? mine : other)[1] == 11, "the call that went ahead got rank 1's block");
                    }
                    // The refused call took no collective id: the ranks still agree.
                    std::vector<int> all = {-1, -1};
                    all[static_cast<std::size_t>(me)] = 20 + me;
                    b.allgather(all.data(), sizeof(int));
                    check(all[0] == 20 && all[1] == 21, "allgather after the refusal");
                  }});
  list.push_back({"a rank that returns instead of calling the collective: its peers fail at once, not at the deadline",
                  2, [](Bootstrap& b) {
                    if (b.rank() == 1) return;  // leaves: a TcpBootstrap is closed, an in-process rank has left
                    b.setTimeout(milliseconds(60000));
                    const auto start = std::chrono::steady_clock::now();
                    int all[2] = {};
                    auto e = errorFrom([&] { b.allgather(all, sizeof(int)); });
                    const auto took = std::chrono::steady_clock::now() - start;
                    check(e.code() == ErrorCode::PeerLost || e.code() == ErrorCode::Aborted,
                          std::string("allgather without rank 1: ") + e.what());
                    check(contains(e.what(), "lost rank 1") && contains(e.what(), "allgather"),
                          std::string("names the rank that left and the operation: ") + e.what());
                    check(took < std::chrono::seconds(20), "ends well before its 60 s deadline");
                  }});
  // Before 2026-12-07 the in-process world delivered such a send into the
  // mailbox of the rank that had left, and the send returned.
  list.push_back({"a send to a rank that has left fails PeerLost, as over TCP", 2, [](Bootstrap& b) {
                    b.barrier();  // over TCP: the link is up, so rank 1 leaves with a goodbye
                    if (b.rank() == 1) return;
                    int token = 0;
                    errorFrom([&] { b.recv(&token, sizeof token, 1, 4); });  // until rank 1 has left
                    const auto sent = errorFrom([&] { b.send(&token, sizeof token, 1, 5); });
                    check(
                        sent.code() == ErrorCode::PeerLost && sent.peer() == 1 &&
                            contains(sent.what(), "rank 0: send to rank 1 tag 5: lost rank 1: it closed its bootstrap"),
                        std::string("the send: ") + sent.what());
                    const auto isent = errorFrom([&] { b.isend(&token, sizeof token, 1, 6).wait(); });
                    check(isent.code() == ErrorCode::PeerLost &&
                              contains(isent.what(), "send to rank 1 tag 6: lost rank 1: it closed its bootstrap"),
                          std::string("the isend: ") + isent.what());
                  }});
  for (const auto& c : testing_api::nonblocking::cases()) list.push_back({c.name, c.nranks, c.body});
  for (const auto& c : testing_api::window::cases()) list.push_back({c.name, c.nranks, c.body});
  for (const auto& c : testing_api::child_names::cases()) list.push_back({c.name, c.nranks, c.body});
  for (const auto& c : testing_api::mismatch::cases()) list.push_back({c.name, c.nranks, c.body});
  for (const auto& c : testing_api::edges::cases()) list.push_back({c.name, c.nranks, c.body});
  for (const char* trial : {"1", "2", "3", "4", "5"})
    list.push_back({(std::string("two threads x 30 all-gathers on one communicator: the misuse is reported on "
                                 "every rank (trial ") +
                     trial + " of 5)"),
                    2, twoThreadsOnOneCommunicator});
  list.push_back({"a collective frame past TETHER_MAX_PAYLOAD_BYTES goes in parts, and a receiver checks each part", 2,
                  partsPastMaxPayload, "65536"});
  for (const std::vector<int>& roots : std::vector<std::vector<int>>{{1, 1, 3, 3}, {0, 0, 2, 2}, {0, 3, 3, 3}})
    list.push_back({"ranks that disagree on a broadcast's root: none takes another root's payload (roots " +
                        std::to_string(roots[0]) + std::to_string(roots[1]) + std::to_string(roots[2]) +
                        std::to_string(roots[3]) + ")",
                    4, [roots](Bootstrap& b) { disagreeOnRoot(b, roots); }});
  return list;
}

}  // namespace

TEST_CASE("scenarios hold over InProcessWorld", "[testing-api][conformance]") {
  for (const auto& scenario : scenarios()) {
    SECTION(scenario.name) {
      std::optional<InProcessWorld> world;
      {
        MaxPayload limit(scenario.maxPayload);
        world.emplace(scenario.nranks);
      }
      REQUIRE_NOTHROW(world->run(scenario.body));
    }
  }
}

TEST_CASE("the same scenarios hold over TcpBootstrap", "[testing-api][conformance]") {
  for (const auto& scenario : scenarios()) {
    SECTION(scenario.name) {
      auto results = tether::test::runRanks(
          scenario.nranks,
          [&](int rank, const tether::UniqueId& id) {
            tether::TcpOptions options;
            options.timeout = milliseconds(10000);
            MaxPayload limit(scenario.maxPayload);  // in the forked rank
            tether::TcpBootstrap bootstrap(rank, scenario.nranks, id, options);
            scenario.body(bootstrap);
          },
          std::chrono::seconds(30));
      INFO(tether::test::summary(results));
      REQUIRE(tether::test::allOk(results));
    }
  }
}
