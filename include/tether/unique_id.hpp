// tether/unique_id.hpp — the 128 opaque bytes that let ranks find each other.
//
// Holds the protocol version, the root's address (IPv4 or IPv6 and port) and a
// random 128-bit secret. Make one on one process (TcpBootstrap::createUniqueId),
// hand it to every rank (toString() through an env var or a file), and pass it
// to the TcpBootstrap constructor. The secret proves membership in the handshake
// and never crosses the wire itself. Byte layout: docs/wire-protocol.md.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace tether {

struct UniqueId {
  static constexpr std::size_t kBytes = 128;
  std::array<unsigned char, kBytes> bytes{};

  // 256 lowercase hex characters.
  std::string toString() const;
  // Throws Error{InvalidArgument} on a malformed string, a wrong magic, an
  // unknown protocol version or a failed checksum.
  static UniqueId fromString(const std::string& text);

  // Decoded fields (valid for an id produced by tether).
  std::uint16_t version() const;
  std::string rootHost() const;  // numeric address, e.g. "127.0.0.1" or "::1"
  std::uint16_t rootPort() const;

  bool operator==(const UniqueId& other) const { return bytes == other.bytes; }
  bool operator!=(const UniqueId& other) const { return bytes != other.bytes; }
};

}  // namespace tether
