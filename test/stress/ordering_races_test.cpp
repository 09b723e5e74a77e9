// Focused versions of the races the stress harness found, small enough to run
// in a second and to point at one cause each. Every rank is a forked process;
// peers reach a rank through its own chaos proxy where the race needs one.
#include <catch2/catch.hpp>

#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "chaos_proxy.hpp"
#include "multiproc.hpp"
#include "payload.hpp"

using namespace tether;
using namespace tether::stress;
using namespace std::chrono_literals;

namespace {

// Joins the world with peers routed through a proxy built from `chaos`.
std::unique_ptr<TcpBootstrap> joinThroughProxy(int rank, int n, const UniqueId& id, chaos::ChaosOptions chaos,
                                               std::unique_ptr<chaos::ChaosProxy>& proxy) {
  chaos.seed = chaos.seed * 131 + static_cast<std::uint64_t>(rank);
  proxy = std::make_unique<chaos::ChaosProxy>(chaos);
  TcpOptions options;
  options.timeout = 5s;
  options.advertiseFor = [&proxy](const std::string& listen) {
    proxy->start(listen);
    return proxy->endpoint();
  };
  return std::make_unique<TcpBootstrap>(rank, n, id, options);
}

void expectClean(const void* block, std::size_t bytes, const OpKey& key) {
  auto problem = checkPayload(block, bytes, key);
  test::expect(!problem, problem.value_or(""));
}

}  // namespace

// A receive posted while a frame's payload is still arriving must get that
// frame; collectives with several steps per peer post exactly then.
TEST_CASE("many small allgathers in a row complete and deliver every block", "[stress][races]") {
  const int n = 4;
  auto results = test::runRanks(
      n,
      [](int rank, const UniqueId& id) {
        TcpOptions options;
        options.timeout = 5s;
        TcpBootstrap world(rank, n, id, options);
        const std::size_t bytes = 300;
        for (std::uint32_t op = 0; op < 200; ++op) {
          std::vector<unsigned char> data(n * bytes);
          fillPayload(data.data() + rank * bytes, bytes, OpKey{0, op, OpKind::Allgather, 0, rank, -1, 0});
          world.allgather(data.data(), bytes);
          for (int j = 0; j < n; ++j)
            expectClean(data.data() + j * bytes, bytes, OpKey{0, op, OpKind::Allgather, 0, j, -1, 0});
        }
      },
      30s);
  INFO(test::summary(results));
  CHECK(test::allOk(results));
}

// Messages with one (peer, tag) arrive in the order sent even when each one
// trickles in and the receiver posts its receives meanwhile. Ranks 1 and 2
// talk: rank 0's links are the rendezvous connections, which bypass proxies.
TEST_CASE("same-tag messages keep their order when payloads arrive in pieces", "[stress][races]") {
  chaos::ChaosOptions trickle;
  trickle.fragmentBytes = {1, 16};
  trickle.delayPiecesUs = {20, 200};
  auto results = test::runRanks(
      3,
      [&](int rank, const UniqueId& id) {
        std::unique_ptr<chaos::ChaosProxy> proxy;
        auto world = joinThroughProxy(rank, 3, id, trickle, proxy);
        const int messages = 40;
        auto key = [](int m) { return OpKey{0, 0, OpKind::SendRecv, 0, 1, 2, static_cast<std::uint32_t>(m)}; };
        if (rank == 1) {
          for (int m = 0; m < messages; ++m) {
            std::vector<unsigned char> msg(kMinPayload + 200);  // equal sizes: a swap would pass a size check
            fillPayload(msg.data(), msg.size(), key(m));
            world->send(msg.data(), msg.size(), 2, 7);
          }
        } else if (rank == 2) {
          // Post each receive at a random moment, so some land while a frame's
          // header is in and its payload is still trickling.
          std::mt19937 rng(11);
          for (int m = 0; m < messages; ++m) {
            std::this_thread::sleep_for(std::chrono::microseconds(rng() % 6000));
            std::vector<unsigned char> msg(kMinPayload + 200);
            world->recv(msg.data(), msg.size(), 1, 7);
            expectClean(msg.data(), msg.size(), key(m));
          }
        }
        world->barrier();
      },
      30s);
  INFO(test::summary(results));
  CHECK(test::allOk(results));
}

// Every pair makes first contact at the same moment from both ends, with the
// proxies holding handshakes back: each pair must settle on one connection.
TEST_CASE("simultaneous first contact from both ends settles on one stream per pair", "[stress][races]") {
  chaos::ChaosOptions slowHandshakes;
  slowHandshakes.holdNewConnMs = {0, 15};
  slowHandshakes.delayPiecesUs = {0, 300};
  for (int attempt = 0; attempt < 5; ++attempt) {
    const int n = 6;
    slowHandshakes.seed = static_cast<std::uint64_t>(attempt + 1);
    auto results = test::runRanks(
        n,
        [&](int rank, const UniqueId& id) {
          std::unique_ptr<chaos::ChaosProxy> proxy;
          auto world = joinThroughProxy(rank, n, id, slowHandshakes, proxy);
          const std::size_t bytes = kMinPayload + 24;
          std::vector<unsigned char> out(n * bytes), in(n * bytes);
          for (int j = 0; j < n; ++j)
            fillPayload(out.data() + j * bytes, bytes, OpKey{0, 0, OpKind::Alltoall, 0, rank, j, 0});
          world->alltoall(out.data(), in.data(), bytes);
          for (int j = 0; j < n; ++j)
            expectClean(in.data() + j * bytes, bytes, OpKey{0, 0, OpKind::Alltoall, 0, j, rank, 0});
          world->barrier();
        },
        30s);
    INFO("attempt " << attempt << "\n" << test::summary(results));
    REQUIRE(test::allOk(results));
  }
}
