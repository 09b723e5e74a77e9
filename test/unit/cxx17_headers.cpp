// Compiled as C++17 with -Wpedantic -Werror: the public headers, including the
// header-only testing API, must stay usable from C++17 runtimes. Links no
// tether library code.
#include <tether/adapters/mscclpp.hpp>
#include <tether/tether.h>
#include <tether/tether.hpp>
#include <tether/detail/coll/settings.hpp>
#include <tether/detail/core/abort_state.hpp>
#include <tether/detail/core/deadline_queue.hpp>
#include <tether/detail/core/deadlines.hpp>
#include <tether/detail/core/failures.hpp>
#include <tether/detail/core/sequence_guard.hpp>
#include <tether/testing/in_process.hpp>
#include <tether/version.h>

// The collective algorithms the testing world replays (also reached through
// in_process.hpp; named here so a new algorithm header is checked on its own).
#include <tether/detail/coll/alltoall_bruck.hpp>
#include <tether/detail/coll/alltoall_tree.hpp>

#include <cstdio>
#include <string>
#include <vector>

static_assert(__cplusplus >= 201703L && __cplusplus < 202002L, "this check must build as C++17");
static_assert(TETHER_VERSION >= TETHER_VERSION_CHECK(0, 1, 0), "tether/version.h defines a comparable version");
static_assert(tether::kDefaultTimeout.count() > 0, "the default timeout is a public constant");

int main() {
  constexpr int kRanks = 4;
  tether::testing::InProcessWorld world(kRanks);
  std::vector<std::vector<long>> results(kRanks);
  world.run([&](tether::Bootstrap& bootstrap) {
    std::vector<long> all(kRanks, -1);
    all[static_cast<std::size_t>(bootstrap.rank())] = 100L * bootstrap.rank() + 7;
    bootstrap.allgather(all.data(), sizeof(long));
    results[static_cast<std::size_t>(bootstrap.rank())] = all;
  });
  for (int r = 0; r < kRanks; ++r) {
    for (int from = 0; from < kRanks; ++from) {
      if (results[r][from] != 100L * from + 7) {
        std::fprintf(stderr, "rank %d got %ld from %d\n", r, results[r][from], from);
        return 1;
      }
    }
  }
  // tether::toString(ErrorCode) is inline: the catch block of docs/integration.md
  // (and of testing-api.md users) needs no library symbol.
  try {
    throw tether::Error(tether::ErrorCode::Protocol, "rank 1: allgather#2: test");
  } catch (const tether::Error& e) {
    if (std::string(tether::toString(e.code())) != "Protocol") return 1;
  }
  std::puts("C++17 allgather over InProcessWorld: ok");
  return 0;
}
