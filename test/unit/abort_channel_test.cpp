// The abort tree: a notice started by any rank, forwarded once by each rank
// that gets it, reaches every live rank — around the lost rank the notice
// names, and around a rank whose link fails after the notice was sent to it.
#include <catch2/catch.hpp>

#include <deque>
#include <memory>
#include <set>
#include <vector>

#include "core/abort_channel.hpp"

using namespace tether;

namespace {

// Delivers the notice from `origin` through every rank's AbortChannel; `known`
// dead ranks are named by the notice, `silent` ones die without anyone
// knowing until a link to them fails. Returns how many times each rank got it.
std::vector<int> spread(int n, int origin, const std::set<int>& known, const std::set<int>& silent) {
  std::vector<std::unique_ptr<AbortChannel>> ch;
  for (int r = 0; r < n; ++r) ch.push_back(std::make_unique<AbortChannel>(r, n));
  std::vector<int> got(static_cast<std::size_t>(n), 0);
  std::deque<std::pair<int, int>> queue;  // (from, to)
  auto handle = [&](int r, int from) {
    if (!ch[r]->beginHandling({static_cast<std::uint32_t>(origin), "test", wire::kNoRank})) return;
    ch[r]->markSent(origin);
    if (from >= 0) ch[r]->markSent(from);
    auto dead = [&](int x) { return known.count(x) > 0; };
    for (int t : ch[r]->treeTargets(r == origin, dead)) queue.emplace_back(r, t);
  };
  handle(origin, -1);
  while (!queue.empty()) {
    auto [from, to] = queue.front();
    queue.pop_front();
    REQUIRE(known.count(to) == 0);  // never dialled
    if (silent.count(to)) {         // the dial fails: the sender routes around it
      for (int t : ch[from]->reroute(to, [&](int x) { return known.count(x) > 0 || silent.count(x) > 0; }))
        queue.emplace_back(from, t);
      continue;
    }
    ++got[to];
    handle(to, from);
  }
  return got;
}

}  // namespace

TEST_CASE("the abort tree reaches every live rank from any origin, around dead ranks, each once", "[unit][abort]") {
  for (int n : {2, 3, 9, 64, 65, 256, 1024}) {
    for (int origin : {0, 1, n / 2, n - 1}) {
      for (int lost : {-1, 0, 1, n - 1, n / 3}) {
        if (lost == origin) continue;
        std::set<int> known;
        if (lost >= 0) known.insert(lost);
        std::set<int> silent;
        if (n > 8 && n / 5 != origin && n / 5 != lost) silent.insert(n / 5);
        INFO("n " << n << " origin " << origin << " lost " << lost);
        auto got = spread(n, origin, known, silent);
        int total = 0;
        for (int r = 0; r < n; ++r) {
          INFO("rank " << r);
          total += got[r];
          if (r == origin || known.count(r) || silent.count(r)) continue;
          CHECK(got[r] >= 1);
        }
        CHECK(total <= 2 * n);  // each rank forwards once: about one notice per rank
      }
    }
  }
}
