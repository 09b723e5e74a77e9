// tether/testing/detail/message.hpp — what an in-process "frame" carries.
//
// The in-process world mimics the wire: every message names the operation that
// produced it (communicator, channel, collective id or tag, step, source) and
// receivers match on that full key, so a payload can never land in the wrong
// operation. Header-only, C++17.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

namespace tether {
namespace testing {
namespace detail {

// Which matching space a message belongs to (separate spaces never collide).
enum class Channel : std::uint8_t { PointToPoint, Collective, SubsetBarrier };

// The full matching key. For PointToPoint `sequence` is the tag; for Collective
// it is the collective id; for SubsetBarrier `group` names the subset and
// `sequence` counts that subset's barriers.
struct ChannelKey {
  std::uint64_t comm = 0;
  Channel channel = Channel::PointToPoint;
  std::uint64_t group = 0;
  std::uint64_t sequence = 0;
  int source = 0;  // sender's rank in the communicator

  bool operator<(const ChannelKey& other) const {
    return std::tie(comm, channel, group, sequence, source) <
           std::tie(other.comm, other.channel, other.group, other.sequence, other.source);
  }
};

// The header a sender stamps on a collective message: which operation, which
// call, and the sizes it used, so the receiver can name both sides of a mismatch.
struct OpStamp {
  std::string name;          // "allgather", "broadcast", ...
  std::uint64_t id = 0;      // collective id (or subset-barrier count)
  int root = -1;             // broadcast root, else -1
  std::size_t bytes = 0;     // per-rank size of the call; per-pair for alltoallv
  bool perPairBytes = false; // alltoallv: sizes legitimately differ between pairs

  std::string describe() const {
    std::string text = name + "#" + std::to_string(id);
    if (root >= 0) text += " root " + std::to_string(root);
    text += " (" + std::to_string(bytes) + " bytes";
    if (perPairBytes) text += " to us";
    return text + ")";
  }
  // Same call on both sides? Sizes of alltoallv are checked per pair by the caller.
  bool sameCallAs(const OpStamp& other) const {
    return name == other.name && id == other.id && root == other.root &&
           (perPairBytes || bytes == other.bytes);
  }
};

struct Message {
  OpStamp op;     // collectives only; empty name for point-to-point
  int step = 0;   // position of this message within the collective
  std::vector<unsigned char> payload;
};

// splitmix64 finaliser: deterministic ids for children and subsets.
inline std::uint64_t mix(std::uint64_t seed, std::uint64_t value) {
  std::uint64_t z = seed ^ (value + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace detail
}  // namespace testing
}  // namespace tether
