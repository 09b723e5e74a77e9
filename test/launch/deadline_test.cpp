// A rendezvous deadline means the full time: a rank whose root never comes up
// fails no earlier than its deadline, and a root that comes up in the last
// part of it is still reached (issue 16, item 6: the dial loop used to stop
// when its next backoff would pass the deadline, up to 1 s early).
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>

#include "env_guard.hpp"
#include "free_port.hpp"
#include "multiproc.hpp"
#include "tether/tether.hpp"

using namespace tether;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

long long msSince(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

}  // namespace

TEST_CASE("a rank whose root never comes up fails no earlier than its deadline", "[launch][deadline]") {
  test::EnvGuard env;
  const test::ReservedLoopbackPort reserved;
  const std::string root = reserved.address();
  for (auto timeout : {1000ms, 2500ms}) {
    auto began = Clock::now();
    try {
      TcpBootstrap b(1, 2, TcpBootstrap::uniqueIdFromRoot(root), TcpOptions{timeout, {}, {}, {}});
      FAIL("joined a world without a root");
    } catch (const Error& e) {
      auto took = msSince(began);
      INFO(e.what() << " after " << took << " ms of " << timeout.count());
      CHECK(e.code() == ErrorCode::Timeout);
      CHECK(took >= timeout.count());         // strictly: not before the deadline
      CHECK(took < timeout.count() + 15000);  // loosely: not much after (a loaded host)
      CHECK(std::string(e.what()).find("timed out after " + std::to_string(timeout.count()) + " ms") !=
            std::string::npos);
    }
  }
}

TEST_CASE("a root that comes up in the last fifth of the deadline is still reached", "[launch][deadline]") {
  const test::ReservedLoopbackPort reserved;
  const std::string root = reserved.address();
  const auto id = TcpBootstrap::uniqueIdFromRoot(root);
  // Rank 1 starts now with an 8 s deadline; rank 0 (the root) at 6.4 s, which
  // leaves 1.6 s for a loaded host to start it.
  auto res = test::runRanks(
      2,
      [&](int rank, const UniqueId&) {
        if (rank == 0) std::this_thread::sleep_for(6400ms);
        TcpBootstrap b(rank, 2, id, TcpOptions{rank == 0 ? 20000ms : 8000ms, {}, {}, {}});
        int v[2] = {-1, -1};
        v[rank] = rank + 7;
        b.allgather(v, sizeof(int));
        test::expect(v[0] == 7 && v[1] == 8, "all-gathered blocks");
      },
      60s);
  INFO(test::summary(res));
  CHECK(test::allOk(res));
}
