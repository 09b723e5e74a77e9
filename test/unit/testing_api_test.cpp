// InProcessWorld: collectives, point-to-point and split produce the right
// contents for several world sizes. Errors: testing_api_errors_test.cpp.
#include <atomic>
#include <filesystem>
#include <set>
#include <thread>
#include <vector>

#include <tether/request.hpp>

#include <catch2/catch.hpp>
#include <tether/testing/in_process.hpp>

#include "testing_api_support.hpp"

using tether::Bootstrap;
using tether::testing::InProcessWorld;
using namespace testing_api;

TEST_CASE("allgather gathers every rank's block", "[testing-api]") {
  for (int n : kWorldSizes) {
    for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{13}, std::size_t{4096}}) {
      CAPTURE(n, bytes);
      InProcessWorld world(n);
      std::vector<std::vector<unsigned char>> results(static_cast<std::size_t>(n));
      world.run([&](Bootstrap& b) {
        std::vector<unsigned char> all(bytes * static_cast<std::size_t>(n), 0);
        for (std::size_t i = 0; i < bytes; ++i) all[b.rank() * bytes + i] = pattern(b.rank(), 0, i);
        b.allgather(all.data(), bytes);
        results[static_cast<std::size_t>(b.rank())] = all;
      });
      for (int r = 0; r < n; ++r) {
        for (int from = 0; from < n; ++from) {
          for (std::size_t i = 0; i < bytes; ++i) {
            REQUIRE(results[r][from * bytes + i] == pattern(from, 0, i));
          }
        }
      }
    }
  }
}

TEST_CASE("alltoall delivers block i to rank i", "[testing-api]") {
  for (int n : kWorldSizes) {
    CAPTURE(n);
    const std::size_t bytes = 24;
    InProcessWorld world(n);
    std::vector<std::vector<unsigned char>> results(static_cast<std::size_t>(n));
    world.run([&](Bootstrap& b) {
      std::vector<unsigned char> out(bytes * n), in(bytes * n, 0);
      for (int to = 0; to < n; ++to) {
        for (std::size_t i = 0; i < bytes; ++i) out[to * bytes + i] = pattern(b.rank(), to, i);
      }
      b.alltoall(out.data(), in.data(), bytes);
      results[static_cast<std::size_t>(b.rank())] = in;
    });
    for (int r = 0; r < n; ++r) {
      for (int from = 0; from < n; ++from) {
        for (std::size_t i = 0; i < bytes; ++i) REQUIRE(results[r][from * bytes + i] == pattern(from, r, i));
      }
    }
  }
}

TEST_CASE("alltoallv delivers per-pair sizes at the given displacements", "[testing-api]") {
  // Rank s sends (s + d) % 4 bytes to rank d (some pairs send nothing).
  auto count = [](int from, int to) { return static_cast<std::size_t>((from + to) % 4); };
  for (int n : kWorldSizes) {
    CAPTURE(n);
    InProcessWorld world(n);
    std::vector<std::vector<unsigned char>> results(static_cast<std::size_t>(n));
    std::vector<std::vector<std::size_t>> displs(static_cast<std::size_t>(n));
    world.run([&](Bootstrap& b) {
      const int me = b.rank();
      std::vector<std::size_t> sendCounts(n), sendDispls(n), recvCounts(n), recvDispls(n);
      std::size_t sendTotal = 0, recvTotal = 0;
      for (int p = 0; p < n; ++p) {
        // Gaps of 3 bytes between blocks check that displacements are honoured.
        sendCounts[p] = count(me, p), sendDispls[p] = sendTotal, sendTotal += sendCounts[p] + 3;
        recvCounts[p] = count(p, me), recvDispls[p] = recvTotal, recvTotal += recvCounts[p] + 3;
      }
      std::vector<unsigned char> out(sendTotal), in(recvTotal, 0xEE);
      for (int p = 0; p < n; ++p) {
        for (std::size_t i = 0; i < sendCounts[p]; ++i) out[sendDispls[p] + i] = pattern(me, p, i);
      }
      b.alltoallv(out.data(), sendCounts.data(), sendDispls.data(), in.data(), recvCounts.data(), recvDispls.data());
      results[me] = in;
      displs[me] = recvDispls;
    });
    for (int r = 0; r < n; ++r) {
      for (int from = 0; from < n; ++from) {
        const std::size_t at = displs[r][from];
        for (std::size_t i = 0; i < count(from, r); ++i) REQUIRE(results[r][at + i] == pattern(from, r, i));
        REQUIRE(results[r][at + count(from, r)] == 0xEE);  // the gap is untouched
      }
    }
  }
}

TEST_CASE("broadcast copies the root's buffer to every rank, from every root", "[testing-api]") {
  for (int n : kWorldSizes) {
    CAPTURE(n);
    const std::size_t bytes = 100;
    InProcessWorld world(n);
    std::vector<std::vector<unsigned char>> results(static_cast<std::size_t>(n * n));
    world.run([&](Bootstrap& b) {
      for (int root = 0; root < n; ++root) {
        std::vector<unsigned char> data(bytes, 0);
        if (b.rank() == root) {
          for (std::size_t i = 0; i < bytes; ++i) data[i] = pattern(root, 99, i);
        }
        b.broadcast(data.data(), bytes, root);
        results[root * n + b.rank()] = data;
      }
    });
    for (int root = 0; root < n; ++root) {
      for (int r = 0; r < n; ++r) {
        for (std::size_t i = 0; i < bytes; ++i) REQUIRE(results[root * n + r][i] == pattern(root, 99, i));
      }
    }
  }
}

TEST_CASE("barrier returns only after every rank has entered it", "[testing-api]") {
  for (int n : kWorldSizes) {
    CAPTURE(n);
    InProcessWorld world(n);
    std::atomic<int> arrived{0};
    std::vector<int> seen(static_cast<std::size_t>(n * 3), -1);
    world.run([&](Bootstrap& b) {
      for (int round = 0; round < 3; ++round) {
        // Stagger arrivals so a barrier that does not wait would be caught.
        if (b.rank() == round % n) std::this_thread::sleep_for(std::chrono::milliseconds(20));
        arrived.fetch_add(1);
        b.barrier();
        seen[round * n + b.rank()] = arrived.load();
        b.barrier();  // nobody starts the next round before all have looked
      }
    });
    for (int round = 0; round < 3; ++round) {
      for (int r = 0; r < n; ++r) REQUIRE(seen[round * n + r] == (round + 1) * n);
    }
  }
}

TEST_CASE("recv matches on tag: tags received in another order than sent", "[testing-api]") {
  InProcessWorld world(2);
  std::vector<int> got;
  world.run([&](Bootstrap& b) {
    if (b.rank() == 0) {
      for (int tag : {1, 2, 3, 2}) {
        int value = tag * 100;  // (read nothing rank 1 writes: `got` is rank 1's)
        b.send(&value, sizeof value, 1, tag);
      }
      int second = 222;
      b.send(&second, sizeof second, 1, 2);
    } else {
      for (int tag : {3, 2, 1, 2, 2}) {
        int value = -1;
        b.recv(&value, sizeof value, 0, tag);
        got.push_back(value);
      }
    }
  });
  // Same tag twice: delivered in send order (non-overtaking).
  REQUIRE(got == std::vector<int>{300, 200, 100, 200, 222});
}

TEST_CASE("point-to-point from many threads: every message once, in order per tag", "[testing-api]") {
  const int threads = 4, messages = 200, n = 3;
  InProcessWorld world(n);
  std::vector<std::vector<std::vector<int>>> received(n, std::vector<std::vector<int>>(threads));
  world.run([&](Bootstrap& b) {
    const int next = (b.rank() + 1) % n, previous = (b.rank() + n - 1) % n;
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        for (int i = 0; i < messages; ++i) {
          int value = b.rank() * 1000000 + t * 1000 + i;
          b.send(&value, sizeof value, next, t);
        }
      });
      workers.emplace_back([&, t] {
        for (int i = 0; i < messages; ++i) {
          int value = -1;
          b.recv(&value, sizeof value, previous, t);
          received[b.rank()][t].push_back(value);
        }
      });
    }
    for (auto& worker : workers) worker.join();
  });
  for (int r = 0; r < n; ++r) {
    const int previous = (r + n - 1) % n;
    for (int t = 0; t < threads; ++t) {
      REQUIRE(received[r][t].size() == static_cast<std::size_t>(messages));
      for (int i = 0; i < messages; ++i) REQUIRE(received[r][t][i] == previous * 1000000 + t * 1000 + i);
    }
  }
}

// The sender returns at once (it leaves): messages it sent before must still
// reach receivers queued behind another thread's receive (20 rounds: a
// receiver failed with "lost rank 0" in about 1 of 10 runs of one round).
TEST_CASE("concurrent receivers on one (peer, tag) each get a distinct message", "[testing-api]") {
  const int receivers = 4, each = 50;
  const int round = GENERATE(range(0, 20));
  INFO("round " << round);
  InProcessWorld world(2);
  std::multiset<int> got;
  std::mutex gotMutex;
  world.run([&](Bootstrap& b) {
    if (b.rank() == 0) {
      for (int i = 0; i < receivers * each; ++i) b.send(&i, sizeof i, 1, 9);
      return;
    }
    std::vector<std::thread> workers;
    for (int t = 0; t < receivers; ++t) {
      workers.emplace_back([&] {
        for (int i = 0; i < each; ++i) {
          int value = -1;
          b.recv(&value, sizeof value, 0, 9);
          std::lock_guard<std::mutex> lock(gotMutex);
          got.insert(value);
        }
      });
    }
    for (auto& worker : workers) worker.join();
  });
  REQUIRE(got.size() == static_cast<std::size_t>(receivers * each));
  for (int i = 0; i < receivers * each; ++i) REQUIRE(got.count(i) == 1);
}

namespace {
int threadsOfThisProcess() {
  int n = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) n += task.exists() ? 1 : 0;
  return n;
}
}  // namespace

// A nonblocking collective is a state machine the peers' messages drive, as
// over TCP's progress thread: starting one starts no thread (before: one
// per request), and it completes though its caller only waits at the end.
TEST_CASE("nonblocking collectives start no thread: 20 in flight, completed by the peers' calls", "[testing-api]") {
  const int n = 3, calls = 20;
  InProcessWorld world(n);
  world.run([&](Bootstrap& b) {
    std::vector<std::vector<int>> all(calls, std::vector<int>(n, -1));
    for (int c = 0; c < calls; ++c) all[c][b.rank()] = 100 * c + b.rank();
    int go = 0;
    if (b.rank() != 0) {  // the others call only once rank 0 has started all of its own
      b.barrier();
      b.recv(&go, sizeof go, 0, 1);
      for (int c = 0; c < calls; ++c) b.allgather(all[c].data(), sizeof(int));
    } else {
      b.barrier();  // every rank's thread is running
      const int before = threadsOfThisProcess();
      std::vector<tether::Request> requests;
      for (int c = 0; c < calls; ++c) requests.push_back(b.iallgather(all[c].data(), sizeof(int)));
      // (ThreadSanitizer's runtime may start a thread of its own meanwhile.)
      const int after = threadsOfThisProcess();
      check(after <= before + 1, "threads before and after starting " + std::to_string(calls) +
                                     " collectives: " + std::to_string(before) + " and " + std::to_string(after));
      for (int r = 1; r < n; ++r) b.send(&go, sizeof go, r, 1);
      for (auto& request : requests) request.wait();
    }
    for (int c = 0; c < calls; ++c)
      for (int r = 0; r < n; ++r) check(all[c][r] == 100 * c + r, "allgather " + std::to_string(c));
  });
}
