// InProcessWorld: split, subset barriers, nodes and timeouts configuration.
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <tether/testing/in_process.hpp>

#include "testing_api_support.hpp"

using tether::Bootstrap;
using tether::ErrorCode;
using tether::testing::InProcessWorld;
using namespace testing_api;

TEST_CASE("split orders children by (key, parent rank) and they work independently", "[testing-api]") {
  for (int n : kWorldSizes) {
    CAPTURE(n);
    InProcessWorld world(n);
    struct Seen {
      int childRank = -2, childSize = -2;
      std::vector<int> gathered;
      bool none = false;
    };
    std::vector<Seen> seen(static_cast<std::size_t>(n));
    world.run([&](Bootstrap& b) {
      // Rank n-1 opts out; the others split by parity with a key that reverses them.
      const int color = b.rank() == n - 1 && n > 1 ? Bootstrap::kNoColor : b.rank() % 2;
      std::shared_ptr<Bootstrap> child = b.split(color, -b.rank());
      Seen& mine = seen[b.rank()];
      if (!child) {
        mine.none = true;
        b.barrier();
        return;
      }
      mine.childRank = child->rank();
      mine.childSize = child->size();
      mine.gathered.assign(child->size(), -1);
      mine.gathered[child->rank()] = b.rank();
      child->allgather(mine.gathered.data(), sizeof(int));
      b.barrier();  // the parent still works after the child's collectives
    });
    for (int r = 0; r < n; ++r) {
      if (r == n - 1 && n > 1) {
        REQUIRE(seen[r].none);
        continue;
      }
      std::vector<int> expected;  // same parity, excluding the opt-out, descending
      for (int p = n - 1; p >= 0; --p) {
        if (p % 2 == r % 2 && !(p == n - 1 && n > 1)) expected.push_back(p);
      }
      REQUIRE(seen[r].childSize == static_cast<int>(expected.size()));
      REQUIRE(seen[r].gathered == expected);
      REQUIRE(expected[seen[r].childRank] == r);
    }
  }
}

TEST_CASE("equal keys fall back to parent rank order; same-color children share an id", "[testing-api]") {
  InProcessWorld world(4);
  std::vector<int> childRanks(4), sums(4);
  world.run([&](Bootstrap& b) {
    auto child = b.split(0, 7);
    childRanks[b.rank()] = child->rank();
    // A second split at the same point of both children must match up too.
    auto grandchild = child->split(child->rank() / 2, 0);
    int value = b.rank(), all[2] = {0, 0};
    all[grandchild->rank()] = value;
    grandchild->allgather(all, sizeof(int));
    sums[b.rank()] = all[0] + all[1];
  });
  REQUIRE(childRanks == std::vector<int>{0, 1, 2, 3});
  REQUIRE(sums == std::vector<int>{1, 1, 5, 5});
}

TEST_CASE("subset barrier involves only the listed ranks and keeps collective ids aligned", "[testing-api]") {
  InProcessWorld world(5);
  std::vector<std::vector<int>> gathered(5);
  world.run([&](Bootstrap& b) {
    b.setTimeout(std::chrono::milliseconds(5000));
    if (b.rank() % 2 == 0) {
      b.barrier({4, 0, 2});  // any order
      b.barrier({0, 2, 4});
    }
    if (b.rank() < 2) b.barrier({1, 0});
    // Had the subset barriers consumed collective ids, this would be a Protocol error.
    std::vector<int> all(5, -1);
    all[b.rank()] = b.rank() * 10;
    b.allgather(all.data(), sizeof(int));
    gathered[b.rank()] = all;
  });
  for (const auto& all : gathered) REQUIRE(all == std::vector<int>{0, 10, 20, 30, 40});
}

TEST_CASE("subset barrier waits for every listed rank", "[testing-api]") {
  InProcessWorld world(3);
  auto slow = world.bootstrap(2);
  slow->setTimeout(std::chrono::milliseconds(150));
  // Rank 2 alone in a barrier with rank 1, which never comes.
  auto error = errorFrom([&] { slow->barrier({1, 2}); });
  REQUIRE(error.code() == ErrorCode::Timeout);
  REQUIRE(contains(error.what(), "rank 2"));
  REQUIRE(contains(error.what(), "subset-barrier#1"));
  REQUIRE(contains(error.what(), "from rank 1"));
}

TEST_CASE("nranksPerNode counts ranks on the same node, also in children", "[testing-api]") {
  InProcessWorld world(6, 4);  // node 0: ranks 0-3, node 1: ranks 4-5
  std::vector<int> world_, child_(6);
  world.run([&](Bootstrap& b) {
    auto child = b.split(b.rank() % 2, 0);  // {0,2,4} and {1,3,5}
    child_[b.rank()] = child->nranksPerNode();
  });
  for (int r = 0; r < 6; ++r) world_.push_back(world.bootstrap(r)->nranksPerNode());
  REQUIRE(world_ == std::vector<int>{4, 4, 4, 4, 2, 2});
  REQUIRE(child_ == std::vector<int>{2, 2, 2, 2, 1, 1});
  REQUIRE(InProcessWorld(3).bootstrap(1)->nranksPerNode() == 3);
}

TEST_CASE("the default timeout comes from TETHER_TIMEOUT_MS, children inherit it", "[testing-api]") {
  REQUIRE(InProcessWorld(1).bootstrap(0)->timeout() == tether::kDefaultTimeout);
  ::setenv("TETHER_TIMEOUT_MS", "1234", 1);
  InProcessWorld world(2);
  ::unsetenv("TETHER_TIMEOUT_MS");
  REQUIRE(world.bootstrap(0)->timeout() == std::chrono::milliseconds(1234));
  std::vector<long long> childTimeouts(2);
  world.run([&](Bootstrap& b) {
    b.setTimeout(std::chrono::milliseconds(4321));
    childTimeouts[b.rank()] = b.split(0, 0)->timeout().count();
  });
  REQUIRE(childTimeouts == std::vector<long long>{4321, 4321});
}

TEST_CASE("a child communicator outlives its world object", "[testing-api]") {
  auto world = std::make_unique<InProcessWorld>(2);
  std::vector<std::shared_ptr<Bootstrap>> children(2);
  world->run([&](Bootstrap& b) { children[b.rank()] = b.split(1, 0); });
  world.reset();
  int received = 0;
  std::thread peer([&] { children[1]->recv(&received, sizeof received, 0, 0); });
  int value = 42;
  children[0]->send(&value, sizeof value, 1, 0);
  peer.join();
  REQUIRE(received == 42);
}

TEST_CASE("a huge timeout does not overflow the deadline", "[testing-api]") {
  InProcessWorld world(2);
  std::vector<int> got(2, -1);
  world.run([&](Bootstrap& b) {
    b.setTimeout(std::chrono::milliseconds::max());
    int value = b.rank() + 40;
    b.send(&value, sizeof value, 1 - b.rank(), 0);
    b.recv(&got[b.rank()], sizeof(int), 1 - b.rank(), 0);
    b.barrier();
  });
  REQUIRE(got == std::vector<int>{41, 40});
}

TEST_CASE("topology: nodes, local ranks and peer hosts follow nranksPerNode, also in children", "[testing-api]") {
  InProcessWorld world(6, 2);  // nodes {0,1} {2,3} {4,5}
  std::vector<std::string> seen(6);
  world.run([&](Bootstrap& b) {
    const int r = b.rank();
    check(b.worldRank() == r, "worldRank of the world communicator");
    check(b.nranksPerNode() == 2 && b.localRank() == r % 2 && b.nodeId() == r / 2 && b.nnodes() == 3,
          "world topology of rank " + std::to_string(r));
    check(b.peerHost(r ^ 1) == b.peerHost(r), "the node mate shares the host");
    check(b.peerHost((r + 2) % 6) != b.peerHost(r), "another node has another host");
    check(b.peerAddress(r ^ 1) != b.peerAddress(r), "each rank has its own address");
    auto node = b.splitByNode();
    check(node && node->size() == 2 && node->rank() == r % 2 && node->nnodes() == 1 && node->nodeId() == 0,
          "splitByNode");
    check(node->worldRank() == r, "a child keeps the world rank");
    auto parity = b.split(r % 2, 0);  // ranks 0,2,4 and 1,3,5: one per node
    check(parity->nnodes() == 3 && parity->nodeId() == parity->rank() && parity->localRank() == 0 &&
              parity->nranksPerNode() == 1,
          "a child spanning every node once");
    seen[r] = b.peerAddress(r);
  });
  REQUIRE(std::set<std::string>(seen.begin(), seen.end()).size() == 6);
}

TEST_CASE("a child communicator's collective lanes are forgotten as each rank's bootstrap of it goes",
          "[testing-api]") {
  // Made by hand (not InProcessWorld) to look at the world's counting.
  auto state = std::make_shared<tether::testing::detail::WorldState>(2, 2);
  std::vector<std::shared_ptr<tether::testing::InProcessBootstrap>> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.push_back(std::make_shared<tether::testing::InProcessBootstrap>(state, 0, std::vector<int>{0, 1}, r,
                                                                          std::chrono::milliseconds(30000)));
  }
  std::vector<std::size_t> whileAlive(2);
  auto body = [&](int r) {
    Bootstrap& b = *ranks[static_cast<std::size_t>(r)];
    for (int i = 0; i < 20; ++i) {
      std::shared_ptr<Bootstrap> child = b.split(0, r);
      std::vector<int> all(2, r);
      child->allgather(all.data(), sizeof(int));
      b.barrier();
      if (i == 19) {
        whileAlive[static_cast<std::size_t>(r)] = state->collectiveLanes();
        b.barrier();  // both have looked
      }
      child.reset();
      b.barrier();  // both ranks' children are gone
    }
  };
  std::thread other(body, 1);
  body(0);
  other.join();
  // The world communicator's two lanes (each rank's to the other) stay; the
  // twentieth child's were counted while it lived.
  REQUIRE(whileAlive == std::vector<std::size_t>{4, 4});
  REQUIRE(state->collectiveLanes() == 2);
}

TEST_CASE("a communicator numbers its nodes in the order of their lowest rank, whatever the world's numbering",
          "[testing-api]") {
  // The rule both worlds run (tether/detail/core/nodes.hpp); ranks of one node need not be adjacent.
  const std::vector<int> nodeOf = {5, 2, 5, 7, 2};
  auto view = [&](int rank) {
    return tether::detail::core::nodeView(5, rank, [&](int r) { return nodeOf[static_cast<std::size_t>(r)]; });
  };
  const auto r2 = view(2), r3 = view(3), r4 = view(4);
  CHECK((r2.nodeId == 0 && r2.localRank == 1 && r2.ranksPerNode == 2 && r2.nnodes == 3));
  CHECK((r3.nodeId == 2 && r3.localRank == 0 && r3.ranksPerNode == 1 && r3.nnodes == 3));
  CHECK((r4.nodeId == 1 && r4.localRank == 1 && r4.ranksPerNode == 2 && r4.nnodes == 3));
}
