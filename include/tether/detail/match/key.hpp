// tether/detail/match/key.hpp — the matching key, in every world. A receive
// is satisfied only by a frame whose key is equal in every field — never by
// (peer, tag) alone. P2P keys leave coll and step 0: point-to-point messages
// match first-in first-out per (peer, communicator, tag), which an ordered
// stream makes non-overtaking. Header-only, C++17.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "tether/detail/wire/frame.hpp"

namespace tether {
namespace detail {
namespace match {

struct Key {
  std::uint32_t src = 0;  // world rank of the sender
  std::uint64_t comm = 0;
  wire::Kind kind = wire::Kind::P2P;
  std::uint64_t coll = 0;
  std::uint32_t step = 0;
  std::uint32_t tag = 0;
  std::uint32_t root = wire::kNoRoot;  // a broadcast's: ranks that disagree on it never match
  bool operator==(const Key& o) const {
    return src == o.src && comm == o.comm && kind == o.kind && coll == o.coll && step == o.step && tag == o.tag &&
           root == o.root;
  }
  bool operator!=(const Key& o) const { return !(*this == o); }
};

// The key of frame `h` from world rank `src`.
inline Key keyOf(std::uint32_t src, const wire::FrameHeader& h) {
  if (h.kind == wire::Kind::P2P) return Key{src, h.comm, h.kind, 0, 0, h.tag, wire::kNoRoot};
  return Key{src, h.comm, h.kind, h.coll, h.step, h.tag, h.root};
}

// A second collective frame under one key is a duplicate (a mailbox keeps
// it once); point-to-point messages under one key queue, first in, first out.
inline bool stashedOnce(const Key& k) { return k.kind == wire::Kind::Collective; }

struct KeyHash {
  std::size_t operator()(const Key& k) const noexcept {
    std::size_t h = std::hash<std::uint64_t>{}(k.comm);
    auto mix = [&](std::uint64_t v) {
      h ^= std::hash<std::uint64_t>{}(v) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    };
    mix(k.src);
    mix(static_cast<std::uint64_t>(k.kind));
    mix(k.coll);
    mix(k.step);
    mix(k.tag);
    mix(k.root);
    return h;
  }
};

}  // namespace match
}  // namespace detail
}  // namespace tether
