// Chooses the rendezvous by name (TETHER_RENDEZVOUS): one case per kind.
#include <fmt/format.h>

#include <algorithm>

#include "rendezvous/rendezvous.hpp"
#include "tether/error.hpp"

namespace tether::rdv {

bool havePmix() {
#ifdef TETHER_HAVE_PMIX
  return true;
#else
  return false;
#endif
}

#ifndef TETHER_HAVE_PMIX
PmixRankSize pmixRankAndSize() { throw Error(ErrorCode::InvalidArgument, kNoPmixText); }
#endif

std::unique_ptr<Rendezvous> make(Host& host, const Config& config, std::string_view name) {
  // Host-local aggregation (on unless TETHER_HOST_LOCAL=0) is what "auto"
  // means on a real loop; an explicit root, tree or pmix is kept exactly. A
  // simulated world (no loop) has none.
  if (name == "auto" && config.io && config.nranks > 1 && config.hostLocal)
    return makeHostLocal(host, config, config.localRanks);
  if (name == "root") return makeRootStar(host, config);
  if (name == "tree") return makeTree(host, config, config.treeRadix);
  if (name == "pmix") {
#ifdef TETHER_HAVE_PMIX
    return makePmix(host, config);
#else
    throw Error(ErrorCode::InvalidArgument, fmt::format("rank {}: {}", config.rank, kNoPmixText), config.rank);
#endif
  }
  if (name == "auto")
    return config.nranks >= kTreeFromRanks ? makeTree(host, config, config.treeRadix) : makeRootStar(host, config);
  throw Error(ErrorCode::InvalidArgument,
              fmt::format("rank {}: TETHER_RENDEZVOUS='{}' (use root, tree, pmix or auto)", config.rank, name),
              config.rank);
}

}  // namespace tether::rdv
