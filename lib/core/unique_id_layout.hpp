// Byte layout of tether::UniqueId (docs/wire-protocol.md, "UniqueId").
#pragma once

#include <cstddef>
#include <cstdint>

#include "tether/unique_id.hpp"
#include "wire/handshake.hpp"
#include "base/layer.hpp"

TETHER_LAYER(6, "core");

namespace tether::uid {

inline constexpr std::uint32_t kMagic = 0x44495554;  // "TUID" little-endian
inline constexpr std::size_t kOffMagic = 0, kOffVersion = 4, kOffFamily = 6, kOffAddr = 8, kOffPort = 24,
                             kOffSecret = 32, kOffChecksum = 120;

struct Fields {
  std::uint16_t version = 0;
  PeerAddress root;  // hostId unused
  wire::Secret secret{};
};

UniqueId make(const Fields& f);
// Throws Error{InvalidArgument} naming what is wrong.
Fields parse(const UniqueId& id);
// The world communicator's id (and the handshake's world): first 8 bytes of
// SHA-256 over "tether-world", NUL, secret.
std::uint64_t worldId(const wire::Secret& secret);

}  // namespace tether::uid
