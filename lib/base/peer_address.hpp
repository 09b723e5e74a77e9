// One rank's listen address and host facts as they travel in the rendezvous
// (and in the UniqueId for the root): family, raw address bytes, port, a host
// id that tells which ranks share a node, and that host's core count (so every
// rank derives the same algorithm choices from the same table).
#pragma once

#include <array>
#include <cstdint>

#include "base/layer.hpp"

TETHER_LAYER(0, "base");

namespace tether {

struct PeerAddress {
  std::uint8_t family = 4;  // 4 or 6
  std::array<unsigned char, 16> addr{};
  std::uint16_t port = 0;
  std::uint64_t hostId = 0;  // ranks with equal ids share a node (docs/design.md, "Host identity")
  std::uint16_t cores = 0;   // cores of that host (0: unknown)
  // A fingerprint of what decides a collective's algorithm, plan and parts on
  // this rank (TETHER_ALGO, TETHER_MAX_PAYLOAD_BYTES: coll::planSettings);
  // ranks whose fingerprints differ would exchange frames of different plans.
  std::uint64_t plans = 0;
};

}  // namespace tether
