// tether/testing/detail/message.hpp — what an in-process "frame" carries, and
// the in-process instance of the shared call table.
//
// The in-process world mimics the wire: every message names the operation that
// produced it (communicator, channel, collective id or tag, operation and
// root, step, source) and receivers match on that full key, so a payload can
// never land in the wrong operation. Posting, matching, settling and failing
// (tether/detail/core/call_table.hpp) and the collective sequence checks
// (sequence_guard.hpp) are the TCP world's code. Header-only, C++17.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tether/detail/core/call_table.hpp"
#include "tether/detail/core/failures.hpp"
#include "tether/detail/core/rank_names.hpp"
#include "tether/detail/core/sequence_guard.hpp"
#include "tether/detail/match/mailbox.hpp"
#include "tether/detail/wire/op.hpp"

namespace tether {
namespace testing {
namespace detail {

// Which matching space a message belongs to (separate spaces never collide).
enum class Channel : std::uint8_t { PointToPoint, Collective };

// The full matching key, as on the wire. For PointToPoint `sequence` is the
// tag; for Collective it is the collective id and `step` the frame's step
// (a subset barrier's communicator is its subset's, as over TCP).
struct ChannelKey {
  std::uint64_t comm = 0;
  Channel channel = Channel::PointToPoint;
  std::uint64_t sequence = 0;
  int source = 0;          // sender's rank in the communicator
  std::uint32_t step = 0;  // collectives: the step within the algorithm
  std::uint32_t code = 0;  // collectives: the operation (coll::Op), as the TCP frame's tag
  int root = -1;           // broadcast: its root

  // A collective's call: "allgather#2", as the TCP world names it.
  std::string call() const {
    namespace coll = ::tether::detail::coll;
    return coll::callName(coll::opName(static_cast<coll::Op>(code)), sequence);
  }

  bool operator==(const ChannelKey& other) const {
    return std::tie(comm, channel, sequence, source, step, code, root) ==
           std::tie(other.comm, other.channel, other.sequence, other.source, other.step, other.code, other.root);
  }
  // The same call (communicator, channel, id), any source and step.
  bool sameCall(const ChannelKey& other) const {
    return comm == other.comm && channel == other.channel && sequence == other.sequence;
  }
};

// splitmix64 finaliser: deterministic ids for children and subsets.
inline std::uint64_t mix(std::uint64_t seed, std::uint64_t value) {
  std::uint64_t z = seed ^ (value + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

struct ChannelKeyHash {
  std::size_t operator()(const ChannelKey& k) const noexcept {
    std::uint64_t h = mix(k.comm, static_cast<std::uint64_t>(k.channel));
    h = mix(h, k.sequence);
    h = mix(mix(h, static_cast<std::uint32_t>(k.source)), k.step);
    return static_cast<std::size_t>(mix(mix(h, k.code), static_cast<std::uint32_t>(k.root)));
  }
};

// A message's header: its full key (which names its operation) and its
// sender's world rank.
struct Header {
  ChannelKey key;
  int from = -1;           // the sender's world rank (its window's lane)
  std::size_t length = 0;  // payload bytes

  // "allgather#2 step 0 (64 bytes)", "send tag 5 (8 bytes)": as the TCP world describes a frame.
  std::string describe() const {
    if (key.channel == Channel::PointToPoint)
      return ::tether::detail::coll::sendTagFrame(static_cast<std::uint32_t>(key.sequence), length);
    return ::tether::detail::coll::stepFrame(key.call(), key.step, length);
  }
};

// A call in flight on one rank (a receive, a collective): what the call
// table and the sequence guard keep, and how its errors name it.
struct Call : ::tether::detail::core::CallState<ChannelKey> {
  // How its errors name ranks (its endpoint's): this one "rank 1" or "rank 1 (world 3)".
  const ::tether::detail::core::RankNames* names = nullptr;
  std::string where;  // "recv from rank 0 tag 3", "allgather#2"
  // A collective: its id's key (communicator, id, operation, root) and its
  // communicator's sequence; null otherwise.
  ChannelKey key;
  ::tether::detail::core::Sequence<Call>* seq = nullptr;
};

// The in-process world's call table: keys and headers of messages.
struct InProcessCalls {
  using Call = detail::Call;
  using Key = ChannelKey;
  using Header = detail::Header;
  using Stashed = ::tether::detail::match::StashedFrame<Header>;
  using Mailbox =
      ::tether::detail::match::Mailbox<Key, ChannelKeyHash, ::tether::detail::match::PostedReceive, Stashed>;
  static Key keyOf(int, const Header& h) { return h.key; }
  static int sourceOf(const Key& k) { return k.source; }
  static std::size_t lengthOf(const Header& h) { return h.length; }
  static std::optional<std::uint64_t> tagOf(const Key& k) {
    return k.channel == Channel::PointToPoint ? std::optional<std::uint64_t>(k.sequence) : std::nullopt;
  }
  static std::uint32_t stepOf(const Key& k) { return k.step; }
  static bool stash(Mailbox& box, const Key& k, Stashed&& f) { return box.stash(k, std::move(f), /*unique=*/false); }

  // The sequence guard's (tether/detail/core/sequence_guard.hpp).
  using Seq = ::tether::detail::core::Sequence<Call>;
  static std::uint64_t commOf(const Header& h) { return h.key.comm; }
  static std::uint64_t collOf(const Header& h) { return h.key.sequence; }
  static Seq* seqOf(const Call& c) { return c.seq; }
  static std::uint64_t collOf(const Call& c) { return c.key.sequence; }
  static const std::string& nameOf(const Call& c) { return c.where; }
  static bool ofCall(const Key& k, const Call& c) { return k.sameCall(c.key); }
  static std::string describe(const Header& h) { return h.describe(); }
  // Messages name their sender by its rank in the communicator.
  static int sourceRank(const Seq&, int src) { return src; }
  static std::string sourceName(const Seq& seq, int src) { return seq.names.name(src); }
  static std::string foreignText(const std::string& src, const Header& h, const Call& c) {
    namespace failures = ::tether::detail::core::failures;
    if (h.key.code != c.key.code) return failures::differentCollectives(src, h.describe());
    if (h.key.root != c.key.root) return failures::differentRoots(src, h.key.call(), h.key.root, c.key.root);
    return std::string();
  }
};
using CallTable = ::tether::detail::core::CallTable<InProcessCalls>;
using SequenceGuard = ::tether::detail::core::SequenceGuard<InProcessCalls>;

}  // namespace detail
}  // namespace testing
}  // namespace tether
