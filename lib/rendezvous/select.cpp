// Chooses the rendezvous by name (TETHER_RENDEZVOUS): one case per kind.
#include <fmt/format.h>

#include <algorithm>

#include "base/env.hpp"
#include "base/settings.hpp"
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
  auto radix = [&] {
    try {
      return static_cast<int>(settings::integer("TETHER_RENDEZVOUS_TREE_RADIX"));
    } catch (const Error& e) {
      throw Error(e.code(), fmt::format("rank {}: {}", config.rank, e.what()), config.rank);
    }
  };
  auto integer = [&](const char* variable) {
    try {
      return static_cast<int>(settings::integer(variable));
    } catch (const Error& e) {
      throw Error(e.code(), fmt::format("rank {}: {}", config.rank, e.what()), config.rank);
    }
  };
  // Host-local aggregation replaces the root star and the tree (not PMIx,
  // which needs no root); a simulated world (no loop) has none.
  if (name != "pmix" && config.io && config.nranks > 1 && integer("TETHER_HOST_LOCAL") == 1)
    return makeHostLocal(host, config, integer("TETHER_LOCAL_NRANKS"));
  if (name == "root") return makeRootStar(host, config);
  if (name == "tree") return makeTree(host, config, radix());
  if (name == "pmix") {
#ifdef TETHER_HAVE_PMIX
    return makePmix(host, config);
#else
    throw Error(ErrorCode::InvalidArgument, fmt::format("rank {}: {}", config.rank, kNoPmixText), config.rank);
#endif
  }
  if (name == "auto")
    return config.nranks >= kTreeFromRanks ? makeTree(host, config, radix()) : makeRootStar(host, config);
  throw Error(ErrorCode::InvalidArgument,
              fmt::format("rank {}: TETHER_RENDEZVOUS='{}' (use root, tree, pmix or auto)", config.rank, name),
              config.rank);
}

}  // namespace tether::rdv
