// Which groups a host's ranks meet in (host_group.hpp), for the entry that
// picks the group to try and the leader that sizes its batch. Internal to the
// rendezvous layer.
#pragma once

#include <algorithm>

#include "base/layer.hpp"
#include "rendezvous/host_group.hpp"

TETHER_LAYER(4, "rendezvous");

namespace tether::rdv::host {

// With a known host size L, groups 0..G-1 (G = ceil(L / groupMax)) hold L
// ranks: group j min(groupMax, L - j * groupMax). A rank tries them from
// its own ((rank mod L) / groupMax: one try each when a host's ranks are
// numbered in a block), cyclically, then groups G, G+1, ... (more ranks than
// L came). Unknown L: groups 0, 1, 2, ... of groupMax each.
inline int groups(const HostGroupOptions& o) {
  return o.localRanks > 0 ? (o.localRanks + o.groupMax - 1) / o.groupMax : 0;
}
inline int groupAt(const HostGroupOptions& o, int probe) {
  const int g = groups(o);
  if (probe >= g) return probe;
  const int first = (o.rank % o.localRanks) / o.groupMax;
  return (first + probe) % g;
}
inline int capOf(const HostGroupOptions& o, int group) {
  return group < groups(o) ? std::min(o.groupMax, o.localRanks - group * o.groupMax) : o.groupMax;
}
// How many ranks make a batch: all of a known group; past a known host's
// groups, each rank (the count was too small); unknown L: a full group.
inline int expectedOf(const HostGroupOptions& o, int group) {
  if (o.localRanks > 0) return group < groups(o) ? capOf(o, group) : 1;
  return o.groupMax;
}

}  // namespace tether::rdv::host
