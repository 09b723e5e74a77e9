// split() and the subset barrier on forked ranks: child communicators share
// the parent's links and run collectives interleaved with the parent's.
#include <catch2/catch.hpp>

#include <vector>

#include "multiproc.hpp"

using namespace tether;
using test::expect;

TEST_CASE("split by color, ordered by key, interleaved with the parent", "[multiproc][split]") {
  int n = GENERATE(1, 3, 5, 8);
  auto res = test::runRanks(n, [n](int rank, const UniqueId& id) {
    TcpOptions o;
    o.timeout = std::chrono::milliseconds(30000);
    TcpBootstrap b(rank, n, id, o);
    // Two colors; keys reverse the order inside each child.
    auto child = b.split(rank % 2, -rank);
    expect(child != nullptr, "child exists");
    std::vector<int> members;
    for (int r = 0; r < n; ++r)
      if (r % 2 == rank % 2) members.push_back(r);
    expect(child->size() == static_cast<int>(members.size()), "child size");
    int expectedRank = static_cast<int>(members.size()) - 1 -
                       static_cast<int>(std::find(members.begin(), members.end(), rank) - members.begin());
    expect(child->rank() == expectedRank, "child rank " + std::to_string(child->rank()));
    for (int round = 0; round < 3; ++round) {
      std::vector<int> cv(child->size(), -1);
      cv[child->rank()] = rank * 10 + round;
      child->allgather(cv.data(), sizeof(int));
      for (int i = 0; i < child->size(); ++i)
        expect(cv[i] == members[members.size() - 1 - i] * 10 + round, "child allgather block " + std::to_string(i));
      std::vector<int> pv(n, -1);
      pv[rank] = rank + round;
      b.allgather(pv.data(), sizeof(int));
      for (int i = 0; i < n; ++i) expect(pv[i] == i + round, "parent allgather block " + std::to_string(i));
      // p2p inside the child uses child ranks.
      if (child->size() > 1) {
        int to = (child->rank() + 1) % child->size(), from = (child->rank() - 1 + child->size()) % child->size();
        int out = child->rank(), in = -1;
        child->send(&out, sizeof out, to, 7);
        child->recv(&in, sizeof in, from, 7);
        expect(in == from, "child p2p");
      }
    }
    // kNoColor opts out.
    auto none = b.split(rank == 0 ? Bootstrap::kNoColor : 1, 0);
    expect((rank == 0) == (none == nullptr), "kNoColor gives no child");
    if (none) none->barrier();
    child->barrier();
    b.barrier();
  });
  INFO(test::summary(res));
  REQUIRE(test::allOk(res));
}

TEST_CASE("subset barrier runs while other ranks do something else", "[multiproc][split]") {
  auto res = test::runRanks(5, [](int rank, const UniqueId& id) {
    TcpOptions o;
    o.timeout = std::chrono::milliseconds(30000);
    TcpBootstrap b(rank, 5, id, o);
    std::vector<int> subset = {3, 0, 2};  // any order
    for (int round = 0; round < 4; ++round) {
      if (rank == 0 || rank == 2 || rank == 3)
        b.barrier(subset);
      else if (rank == 1) {
        int v = round;
        b.send(&v, sizeof v, 4, 1);
      } else {
        int v = -1;
        b.recv(&v, sizeof v, 1, 1);
        expect(v == round, "p2p beside subset barrier");
      }
    }
    b.barrier();  // the subset barriers consumed no collective ids of the whole world
    bool threw = false;
    try {
      b.barrier({0, 1, 1});
    } catch (const Error& e) {
      threw = e.code() == ErrorCode::InvalidArgument;
    }
    expect(threw, "duplicate rank in subset rejected");
    threw = false;
    try {
      b.barrier({(rank + 1) % 5});
    } catch (const Error& e) {
      threw = e.code() == ErrorCode::InvalidArgument;
    }
    expect(threw, "subset without the caller rejected");
  });
  INFO(test::summary(res));
  REQUIRE(test::allOk(res));
}
