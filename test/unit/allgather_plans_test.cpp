// The all-gather rows of the algorithm table, recorded for every rank and
// replayed together (plan_replay.hpp): each fills every rank's buffer with
// every rank's block, keeps the plan rules and the full-key rule, and the
// leaders row costs what its formula says. No sockets.
#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <vector>

#include "plan_replay.hpp"
#include "tether/detail/coll/table.hpp"

namespace dc = tether::detail::coll;
using planreplay::Memory;
using planreplay::Replay;
using planreplay::Stats;

namespace {

unsigned char pattern(int src, std::size_t i) { return static_cast<unsigned char>(src * 131 + i * 7 + 1); }

Stats runAllgather(const char* name, int n, std::size_t bytes, int radix = 64) {
  INFO(name << " N=" << n << " bytes=" << bytes << " radix=" << radix);
  const dc::Algorithm* algo = dc::findAlgorithm(dc::Op::Allgather, name);
  REQUIRE(algo != nullptr);
  dc::Call c;
  c.op = dc::Op::Allgather;
  c.bytes = bytes;
  std::vector<dc::Plan> plans;
  std::vector<Memory> mem(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    dc::Shape s;
    s.rank = r;
    s.size = n;
    s.radix = radix;
    plans.push_back(dc::record(*algo, s, c));
    auto& m = mem[static_cast<std::size_t>(r)];
    m.out.assign(static_cast<std::size_t>(n) * bytes, 0xEE);
    for (std::size_t i = 0; i < bytes; ++i) m.out[static_cast<std::size_t>(r) * bytes + i] = pattern(r, i);
  }
  const Stats st = Replay(plans, mem).run();
  for (int r = 0; r < n; ++r)
    for (int s = 0; s < n; ++s)
      for (std::size_t i = 0; i < bytes; ++i)
        PLAN_CHECK(mem[static_cast<std::size_t>(r)].out[static_cast<std::size_t>(s) * bytes + i] == pattern(s, i),
                   name << " N=" << n << ": rank " << r << " has a wrong byte " << i << " of rank " << s << "'s block");
  return st;
}

}  // namespace

TEST_CASE("every all-gather row fills every rank's buffer for N = 1..70 and blocks of 0, 1 and 7 bytes",
          "[unit][allgather]") {
  for (int n = 1; n <= 70; ++n)
    for (const char* name : {"bruck", "ring", "linear", "tree", "leaders"})
      for (std::size_t bytes : {0, 1, 7}) runAllgather(name, n, bytes);
  for (int radix : {2, 3, 16})
    for (int n = 1; n <= 40; ++n) runAllgather("tree", n, 3, radix);
}

TEST_CASE(
    "the leaders all-gather: about 2N messages, three rounds, a leader talks to G - 1 members and M - 1 leaders, "
    "at most 48, or 62 at 1,024 ranks",
    "[unit][allgather]") {
  for (int n : {2, 3, 5, 16, 17, 63, 64, 65, 100, 256, 257, 1000}) {
    INFO("N=" << n);
    const int G = dc::leadersGroup(n);
    CHECK(G * G >= n);
    const int M = (n + G - 1) / G;
    const Stats st = runAllgather("leaders", n, 2);
    CHECK(st.messages == static_cast<std::size_t>(2 * (n - M) + M * (M - 1)));
    CHECK(st.rounds <= 3);
    for (int r = 0; r < n; ++r) {
      const bool leader = r % G == 0;
      const int members = std::min(G, n - r / G * G) - 1;
      CHECK(st.peers[static_cast<std::size_t>(r)].size() == static_cast<std::size_t>(leader ? members + M - 1 : 1));
    }
    CHECK(st.mostPeers() <= static_cast<std::size_t>(G - 1 + M - 1));
    CHECK(st.mostPeers() <= static_cast<std::size_t>(std::max(dc::kLeaderLinks, 2 * (dc::leadersGroup(n) - 1))));
  }
}

TEST_CASE("the leaders all-gather's groups: the largest within 48 links, at least ceil(sqrt N)", "[unit][allgather]") {
  CHECK(dc::leadersGroup(1) == 1);
  CHECK(dc::leadersGroup(64) == 48);    // 47 members + 1 leader
  CHECK(dc::leadersGroup(256) == 44);   // 43 members + 5 leaders
  CHECK(dc::leadersGroup(1024) == 32);  // none fits 48: the fewest, 31 + 31
}

TEST_CASE(
    "all-gather selection when ranks outnumber cores: the flat tree up to 64 ranks, leaders from 65, the tree again at "
    "1,024",
    "[unit][allgather]") {
  auto pick = [](int n, bool cpuBound) {
    dc::Shape s;
    s.size = n;
    s.cpuBound = cpuBound;
    dc::Call c;
    c.op = dc::Op::Allgather;
    c.bytes = 64;
    return std::string(dc::choose(s, c)->name);
  };
  CHECK(pick(16, true) == "tree");
  CHECK(pick(64, true) == "tree");
  CHECK(pick(65, true) == "leaders");
  CHECK(pick(256, true) == "leaders");
  // At 1,024 no group fits 48 links: 31 members and 31 leaders, 2,976 messages against the tree's 2,046.
  CHECK(pick(1024, true) == "tree");
  CHECK(pick(256, false) == "bruck");
}

// dc::treeRadix. Radix 64 gave rank 0 of 1,024 ranks 78 links, past the
// default link budget of 64: it closed and dialled again some of them in
// every call (325-407 budget closes over six all-gathers; 2,808-2,873 at 256
// ranks over 110 calls, at twice the latency; docs/benchmarks.md).
TEST_CASE(
    "the tree rows' default radix keeps the root within 48 links past 64 ranks, flat up to 64, a given radix as given",
    "[unit][allgather]") {
  for (int n : {49, 64}) {
    const Stats flat = runAllgather("tree", n, 1, 0);
    CHECK(flat.peers[0].size() == static_cast<std::size_t>(n - 1));
    CHECK(flat.mostPeers() == static_cast<std::size_t>(n - 1));
  }
  for (int n : {65, 256, 1024}) {
    INFO("N=" << n);
    const Stats st = runAllgather("tree", n, 1, 0);
    CHECK(st.mostPeers() <= 48);
    CHECK(st.mostPeers() >= 40);  // still as wide as it may be: no needless extra level
  }
  CHECK(dc::treeRadix(256) == 44);   // two levels, as radix 64
  CHECK(dc::treeRadix(1024) == 24);  // three levels: no radix of two levels keeps 48
  CHECK(dc::knomialRootLinks(1024, 64) == 78);
  CHECK(dc::treeRadix(1024, 64) == 64);  // TETHER_ALGO=tree_radix=64: as given
  CHECK(runAllgather("tree", 1024, 1, 64).peers[0].size() == 78);

  // The barrier's tree too.
  dc::Shape s;
  s.size = 1024;
  dc::Call c;
  c.op = dc::Op::Barrier;
  const dc::Algorithm* barrier = dc::findAlgorithm(dc::Op::Barrier, "tree");
  REQUIRE(barrier != nullptr);
  dc::Plan plan = dc::record(*barrier, s, c);  // named: steps() refers into it
  std::set<int> peers;
  for (const auto& step : plan.steps())
    if (step.peer >= 0) peers.insert(step.peer);
  CHECK(peers.size() <= 48);
}
