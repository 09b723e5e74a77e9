// tether/detail/core/nodes.hpp — a communicator's view of the nodes its ranks
// run on, the same in every world (lib/core's Communicator from the hosts the
// ranks advertised; the testing world from its groups of ranks). Header-only,
// C++17.
#pragma once

#include <unordered_map>

namespace tether {
namespace detail {
namespace core {

// Bootstrap::nranksPerNode, localRank, nodeId and nnodes of one rank.
struct NodeView {
  int ranksPerNode = 1;  // ranks of this communicator on this rank's node
  int localRank = 0;     // this rank's place among them
  int nodeId = 0;        // this rank's node, numbered in the order of its lowest rank here
  int nnodes = 1;        // nodes with a rank of this communicator
};

// Rank `rank` of a communicator of `size` ranks, where `nodeOf(r)` is the
// node (any numbering) of communicator rank r.
template <class NodeOf>
NodeView nodeView(int size, int rank, NodeOf nodeOf) {
  std::unordered_map<int, int> local;  // node -> node of this communicator
  const int myNode = nodeOf(rank);
  NodeView v;
  v.ranksPerNode = 0;
  for (int r = 0; r < size; ++r) {
    const int node = nodeOf(r);
    local.emplace(node, static_cast<int>(local.size()));
    if (node != myNode) continue;
    if (r < rank) ++v.localRank;
    ++v.ranksPerNode;
  }
  v.nodeId = local[myNode];
  v.nnodes = static_cast<int>(local.size());
  return v;
}

}  // namespace core
}  // namespace detail
}  // namespace tether
