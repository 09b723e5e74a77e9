// Re-initialising a world at one fixed root address, at once (MSCCL++'s
// "resume": destroy, create again). A new rank may dial while the old root
// still drains; the old root answers "stale", which must make the dialler
// retry, not wait out its deadline (issue 16, item 10).
#include <catch2/catch.hpp>
#include <memory>
#include <string>

#include "env_guard.hpp"
#include "free_port.hpp"
#include "multiproc.hpp"
#include "tether/tether.hpp"

using namespace tether;
using namespace std::chrono_literals;

TEST_CASE("500 back-to-back re-inits of 4 ranks at one fixed root address all join", "[launch][rejoin]") {
  test::EnvGuard env;
  const test::ReservedLoopbackPort reserved;
  const std::string root = reserved.address();
  constexpr int kRanks = 4, kRounds = 500;
  auto res = test::runRanks(
      kRanks,
      [&](int rank, const UniqueId&) {
        for (int round = 0; round < kRounds; ++round) {
          auto b = std::make_unique<TcpBootstrap>(rank, kRanks, TcpBootstrap::uniqueIdFromRoot(root),
                                                  TcpOptions{20000ms, {}, {}, {}});
          int v[kRanks] = {};
          v[rank] = round * 10 + rank;
          b->allgather(v, sizeof(int));
          for (int r = 0; r < kRanks; ++r)
            test::expect(v[r] == round * 10 + r, "round " + std::to_string(round) + ": block " + std::to_string(r));
          b.reset();  // destroy, then create again at once
        }
      },
      240s);
  INFO(test::summary(res));
  CHECK(test::allOk(res));
}
