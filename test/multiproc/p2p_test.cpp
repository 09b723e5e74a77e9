// Point-to-point on forked ranks: tags received out of order, non-overtaking
// per (peer, tag), many threads at once, large payloads, sends to self.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <vector>

#include "multiproc.hpp"

using namespace tether;
using test::expect;

namespace {

TcpOptions opts() {
  TcpOptions o;
  o.timeout = std::chrono::milliseconds(30000);
  return o;
}

void run(int n, const std::function<void(TcpBootstrap&)>& body) {
  auto res = test::runRanks(n, [&](int rank, const UniqueId& id) {
    TcpBootstrap b(rank, n, id, opts());
    body(b);
    b.barrier();
  });
  INFO(test::summary(res));
  REQUIRE(test::allOk(res));
}

}  // namespace

TEST_CASE("p2p: tags received in the reverse order of sending", "[multiproc][p2p]") {
  run(2, [](TcpBootstrap& b) {
    constexpr int kTags = 16;
    if (b.rank() == 0) {
      for (int t = 0; t < kTags; ++t) {
        std::vector<int> v(t + 1, t * 100);
        b.send(v.data(), v.size() * sizeof(int), 1, t);
      }
    } else {
      for (int t = kTags - 1; t >= 0; --t) {
        std::vector<int> v(t + 1, -1);
        b.recv(v.data(), v.size() * sizeof(int), 0, t);
        for (int x : v) expect(x == t * 100, "payload of tag " + std::to_string(t));
      }
    }
  });
}

TEST_CASE("p2p: messages with the same tag are not overtaken", "[multiproc][p2p]") {
  run(3, [](TcpBootstrap& b) {
    constexpr int kMsgs = 200;
    if (b.rank() != 2) {
      for (int i = 0; i < kMsgs; ++i) {
        int v[2] = {b.rank(), i};
        b.send(v, sizeof v, 2, 5);
      }
    } else {
      for (int i = 0; i < kMsgs; ++i)
        for (int src : {1, 0}) {
          int v[2] = {-1, -1};
          b.recv(v, sizeof v, src, 5);
          expect(v[0] == src && v[1] == i, "message " + std::to_string(i) + " from rank " + std::to_string(src) +
                                               " arrived as (" + std::to_string(v[0]) + "," + std::to_string(v[1]) +
                                               ")");
        }
    }
  });
}

TEST_CASE("p2p: several threads send and receive concurrently", "[multiproc][p2p]") {
  run(4, [](TcpBootstrap& b) {
    constexpr int kThreads = 4, kMsgs = 50;
    const int n = b.size(), r = b.rank();
    std::vector<std::thread> threads;
    std::vector<std::string> errors(kThreads);
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        try {
          int to = (r + 1) % n, from = (r - 1 + n) % n;
          for (int i = 0; i < kMsgs; ++i) {
            int out[3] = {r, t, i}, in[3] = {-1, -1, -1};
            b.send(out, sizeof out, to, 100 + t);
            b.recv(in, sizeof in, from, 100 + t);
            if (in[0] != from || in[1] != t || in[2] != i)
              throw std::runtime_error("thread " + std::to_string(t) + " message " + std::to_string(i));
          }
        } catch (const std::exception& e) {
          errors[t] = e.what();
        }
      });
    for (auto& th : threads) th.join();
    for (auto& e : errors) expect(e.empty(), e);
  });
}

TEST_CASE("p2p: large payloads land intact", "[multiproc][p2p]") {
  run(2, [](TcpBootstrap& b) {
    for (std::size_t bytes : {std::size_t{65536}, std::size_t{65537}, std::size_t{8} << 20}) {
      std::vector<unsigned char> v(bytes);
      if (b.rank() == 0) {
        for (std::size_t i = 0; i < bytes; ++i) v[i] = static_cast<unsigned char>(i * 13 + bytes);
        b.send(v.data(), bytes, 1, 1);
      } else {
        b.recv(v.data(), bytes, 0, 1);
        for (std::size_t i = 0; i < bytes; ++i)
          if (v[i] != static_cast<unsigned char>(i * 13 + bytes)) expect(false, "byte " + std::to_string(i));
      }
    }
  });
}

TEST_CASE("p2p: a rank can send to itself", "[multiproc][p2p]") {
  run(1, [](TcpBootstrap& b) {
    int out = 42, in = 0;
    b.send(&out, sizeof out, 0, 3);
    b.recv(&in, sizeof in, 0, 3);
    expect(in == 42, "self message");
  });
}

namespace {

// Sockets this process holds (listener, links, lingering connections).
int socketCount() {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    auto target = std::filesystem::read_symlink(e.path(), ec);
    if (!ec && target.string().rfind("socket:", 0) == 0) ++n;
  }
  return n;
}

}  // namespace

// TETHER_MAX_LINKS=1: every new peer closes the least recently used idle link
// (goodbye -> ack -> close) and a later frame reopens it with a fresh dial;
// per-(peer, tag) order must hold across every close and reopen.
TEST_CASE("p2p: with a budget of one link, messages stay in order across idle closes and reopens",
          "[multiproc][p2p][budget]") {
  const int n = 10, rounds = 8;
  auto res = test::runRanks(
      n,
      [&](int rank, const UniqueId& id) {
        ::setenv("TETHER_MAX_LINKS", "1", 1);
        TcpBootstrap b(rank, n, id, opts());
        if (rank == 1) {
          for (int round = 0; round < rounds; ++round)
            for (int dst = 2; dst < n; ++dst) {
              int out[2] = {round, dst};
              b.send(out, sizeof out, dst, 7);
              int back[2] = {-1, -1};
              b.recv(back, sizeof back, dst, 8);
              expect(back[0] == round && back[1] == dst,
                     "reply " + std::to_string(round) + " from " + std::to_string(dst));
            }
          // Peers may dial us at any time (the budget is soft for incoming
          // links), but once the closes have lingered out, this rank holds its
          // listener, its one current link and at most one more: without the
          // budget it would keep a link to each of ranks 0 and 2..9 (10 sockets).
          // The deadline only turns a close that never finishes into a failure.
          int sockets = socketCount();
          for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
               sockets > 3 && std::chrono::steady_clock::now() < until; sockets = socketCount())
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
          expect(sockets <= 3, "at most 3 sockets under a budget of one link, holding " + std::to_string(sockets));
        } else if (rank >= 2) {
          for (int round = 0; round < rounds; ++round) {
            int in[2] = {-1, -1};
            b.recv(in, sizeof in, 1, 7);
            expect(in[0] == round && in[1] == rank, "message " + std::to_string(round) + " in order");
            b.send(in, sizeof in, 1, 8);
          }
        }
        b.barrier();
      },
      std::chrono::seconds(120));
  INFO(test::summary(res));
  REQUIRE(test::allOk(res));
}

// docs/ordering.md, "What spin found", finding 1: rank 2's first contact with
// rank 1 is a send, and it destroys its bootstrap right after, while its dial
// is still on the way; rank 1 posts the receive (which dials rank 2) only
// then. The shutting-down rank keeps listening (rule R7), so the two dials
// resolve as usual and the frame arrives instead of both sides giving up.
TEST_CASE("p2p: a last send arrives although the sender destroys its bootstrap at once", "[multiproc][p2p]") {
  for (int trial = 0; trial < 5; ++trial) {
    auto res = test::runRanks(3, [&](int rank, const UniqueId& id) {
      TcpBootstrap b(rank, 3, id, opts());
      if (rank == 2) {
        int v = 4242 + trial;
        b.send(&v, sizeof v, 1, 3);
        return;  // ~TcpBootstrap at once
      }
      if (rank == 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20 * trial));
        int v = 0;
        b.recv(&v, sizeof v, 2, 3);
        expect(v == 4242 + trial, "the last send's payload");
      }
    });
    INFO("trial " << trial << ": " << test::summary(res));
    REQUIRE(test::allOk(res));
  }
}
