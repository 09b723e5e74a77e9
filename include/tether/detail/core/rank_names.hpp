// tether/detail/core/rank_names.hpp — how one communicator's errors name
// ranks, in every world: "rank 3" on the world communicator; on a child,
// "rank 1 (world 3)" — the communicator rank first, as its caller numbers
// ranks (and as Error::rank() and Error::peer() give them), then the world
// rank, as the job's logs do. Immutable once made; shared by a
// communicator's calls. Header-only, C++17.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "tether/detail/core/failures.hpp"

namespace tether {
namespace detail {
namespace core {

class RankNames {
 public:
  // The world communicator's, for world rank `rank`.
  explicit RankNames(int rank) : rank_(rank) {}
  // A child communicator's: this rank `rank`, `worldRanks[r]` the world rank of its rank r.
  RankNames(int rank, std::vector<int> worldRanks) : rank_(rank), worldRanks_(std::move(worldRanks)), child_(true) {}

  bool child() const { return child_; }
  // This rank, in the communicator.
  int rank() const { return rank_; }
  int worldRank(int rank) const {
    return child_ && rank >= 0 && static_cast<std::size_t>(rank) < worldRanks_.size()
               ? worldRanks_[static_cast<std::size_t>(rank)]
               : rank;
  }
  // The communicator rank of world rank `worldRank` (-1: not a member).
  // Error paths only: a search.
  int rankOf(int worldRank) const {
    if (!child_ || worldRank < 0) return worldRank;
    auto it = std::find(worldRanks_.begin(), worldRanks_.end(), worldRank);
    return it == worldRanks_.end() ? -1 : static_cast<int>(it - worldRanks_.begin());
  }

  // "rank 1" or "rank 1 (world 3)"; `more` ("127.0.0.1:5000") goes inside the parentheses.
  std::string name(int rank, const std::string& more = std::string()) const {
    std::string inside = child_ ? "world " + std::to_string(worldRank(rank)) : std::string();
    if (!more.empty()) inside += (inside.empty() ? "" : ", ") + more;
    return failures::rankName(rank) + (inside.empty() ? std::string() : " (" + inside + ")");
  }
  // This rank's name: who raises an error.
  std::string who() const { return name(rank_); }
  // A world rank's name here: a member's, else "world rank 5".
  std::string nameOfWorld(int worldRank, const std::string& more = std::string()) const {
    const int r = rankOf(worldRank);
    if (r >= 0 || !child_) return name(r, more);
    return "world " + failures::rankName(worldRank) + (more.empty() ? std::string() : " (" + more + ")");
  }

 private:
  int rank_;
  std::vector<int> worldRanks_;
  bool child_ = false;
};

}  // namespace core
}  // namespace detail
}  // namespace tether
