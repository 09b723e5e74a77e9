// tether/detail/coll/leaders.hpp — the groups of the leaders all-gather and
// all-to-all (allgather.hpp, alltoall_leaders.hpp): G consecutive ranks, the
// first of each leading. Both rows use the same groups, so a communicator
// that runs both keeps one set of links. Header-only, C++17.
#pragma once

namespace tether {
namespace detail {
namespace coll {

// Links a leader may hold: its G - 1 members and M - 1 other leaders, within
// the default link budget (TETHER_MAX_LINKS = 64) with room for the
// rendezvous' links.
constexpr int kLeaderLinks = 48;

// The largest group whose leaders hold at most kLeaderLinks links (fewer
// groups: fewer leader-to-leader messages, which grow as M^2), and at least
// ceil(sqrt(N)), the fewest links possible (62 at 1,024 ranks).
inline int leadersGroup(int n) {
  int g = 1;
  while (static_cast<long long>(g) * g < n) ++g;
  for (int bigger = g + 1; bigger <= n; ++bigger) {
    const int groups = (n + bigger - 1) / bigger;
    if (bigger - 1 + groups - 1 > kLeaderLinks) break;
    g = bigger;
  }
  return g;
}

}  // namespace coll
}  // namespace detail
}  // namespace tether
