// Bring-up without sockets: the world's nodes as the rendezvous table shows
// them (host ids and core counts of every rank).
#include <catch2/catch.hpp>

#include <vector>

#include "core/bring_up.hpp"

using namespace tether;

TEST_CASE("Nodes are numbered by their lowest rank and a node with more ranks than cores is CPU-bound",
          "[unit][core]") {
  // Ranks 0, 2, 3 on host 7 (2 cores); ranks 1 and 4 on host 9 (8 cores).
  const std::vector<std::uint64_t> host{7, 9, 7, 7, 9};
  auto address = [&](int r) {
    PeerAddress a;
    a.hostId = host[static_cast<std::size_t>(r)];
    a.cores = host[static_cast<std::size_t>(r)] == 7 ? 2 : 8;
    return a;
  };
  const Topology t = learnTopology(5, address);
  CHECK(t.nodeOf == std::vector<int>{0, 1, 0, 0, 1});
  CHECK(t.ranksOn == std::vector<int>{3, 2});
  CHECK(t.cpuBound);
  const Topology small = learnTopology(2, address);  // ranks 0 and 1: one per host
  CHECK(small.ranksOn == std::vector<int>{1, 1});
  CHECK_FALSE(small.cpuBound);
}
