// Chooses the rendezvous by name (TETHER_RENDEZVOUS): one case per kind.
#include <fmt/format.h>

#include <algorithm>

#include "base/env.hpp"
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
    const std::int64_t r = env::getInt("TETHER_RENDEZVOUS_RADIX", kDefaultTreeRadix);
    if (r < 2)
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("rank {}: TETHER_RENDEZVOUS_RADIX={} (use 2 or more)", config.rank, r), config.rank);
    return static_cast<int>(std::min<std::int64_t>(r, 1 << 20));
  };
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
