// Point-to-point on forked ranks: tags received out of order, non-overtaking
// per (peer, tag), many threads at once, large payloads, sends to self.
#include <catch2/catch.hpp>

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
                                               " arrived as (" + std::to_string(v[0]) + "," + std::to_string(v[1]) + ")");
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
            if (in[0] != from || in[1] != t || in[2] != i) throw std::runtime_error("thread " + std::to_string(t) + " message " + std::to_string(i));
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
