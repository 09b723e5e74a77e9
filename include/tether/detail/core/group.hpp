// tether/detail/core/group.hpp — a communicator's group, and the groups of
// its children, derived the same in every world (lib/core's Communicator and
// the in-process testing world): its id, this rank's rank in it and each
// rank's world rank; a split()'s child (members by key, ties by parent rank:
// split.hpp; its id from the parent's, the split's collective id and the
// color: comm_ids.hpp) and a subset barrier's group (its own communicator,
// over the subset's ranks in ascending order). Header-only, C++17.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <vector>

#include "tether/detail/core/comm_ids.hpp"
#include "tether/detail/core/split.hpp"

namespace tether {
namespace detail {
namespace core {

struct Group {
  std::uint64_t comm = 0;
  int rank = 0;
  std::vector<int> worldRanks;  // rank -> world rank

  // The world communicator `comm` of `nranks`, seen by world rank `rank`.
  static Group world(std::uint64_t comm, int rank, int nranks) {
    Group g;
    g.comm = comm;
    g.rank = rank;
    g.worldRanks.resize(static_cast<std::size_t>(nranks));
    std::iota(g.worldRanks.begin(), g.worldRanks.end(), 0);
    return g;
  }

  int size() const { return static_cast<int>(worldRanks.size()); }
  int worldRankOf(int r) const { return worldRanks[static_cast<std::size_t>(r)]; }
  int worldRank() const { return worldRankOf(rank); }

  // This rank's child from split() collective `splitId`, which gathered
  // every rank's (color, key) into `pairs`; this rank gave `color` (not
  // Bootstrap::kNoColor).
  Group child(std::uint64_t splitId, int color, const std::vector<std::int32_t>& pairs) const {
    const SplitMembers members = splitMembers(pairs, rank, color);
    Group g;
    g.comm = splitComm(comm, splitId, color);
    g.rank = members.rank;
    for (int p : members.parentRanks) g.worldRanks.push_back(worldRankOf(p));
    return g;
  }

  // The group of a subset barrier over `sorted`, ranks of this communicator
  // in ascending order, this rank among them (tether/detail/args.hpp checks).
  Group subset(const std::vector<int>& sorted) const {
    Group g;
    g.comm = subsetComm(comm, sorted);
    g.rank = static_cast<int>(std::find(sorted.begin(), sorted.end(), rank) - sorted.begin());
    for (int r : sorted) g.worldRanks.push_back(worldRankOf(r));
    return g;
  }
};

}  // namespace core
}  // namespace detail
}  // namespace tether
