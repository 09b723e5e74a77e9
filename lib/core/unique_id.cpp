#include <cstring>

#include "base/bytes.hpp"
#include "base/crypto.hpp"
#include "base/endpoint.hpp"
#include "core/unique_id_layout.hpp"
#include "tether/error.hpp"
#include "wire/frame.hpp"

namespace tether {
namespace uid {
namespace {

crypto::Digest checksum(const UniqueId& id) { return crypto::sha256(id.bytes.data(), kOffChecksum); }

}  // namespace

UniqueId make(const Fields& f) {
  UniqueId id;
  le::store<std::uint32_t>(id.bytes.data() + kOffMagic, kMagic);
  le::store<std::uint16_t>(id.bytes.data() + kOffVersion, f.version);
  id.bytes[kOffFamily] = f.root.family;
  std::memcpy(id.bytes.data() + kOffAddr, f.root.addr.data(), f.root.addr.size());
  le::store<std::uint16_t>(id.bytes.data() + kOffPort, f.root.port);
  std::memcpy(id.bytes.data() + kOffSecret, f.secret.data(), f.secret.size());
  auto sum = checksum(id);
  std::memcpy(id.bytes.data() + kOffChecksum, sum.data(), UniqueId::kBytes - kOffChecksum);
  return id;
}

std::uint64_t worldId(const wire::Secret& secret) {
  return crypto::hash64("tether-world", std::string_view(reinterpret_cast<const char*>(secret.data()), secret.size()));
}

Fields parse(const UniqueId& id) {
  auto bad = [](const std::string& why) {
    return Error(ErrorCode::InvalidArgument, "invalid tether UniqueId: " + why);
  };
  if (le::load<std::uint32_t>(id.bytes.data() + kOffMagic) != kMagic) throw bad("wrong magic (not a tether id)");
  auto sum = checksum(id);
  if (std::memcmp(sum.data(), id.bytes.data() + kOffChecksum, UniqueId::kBytes - kOffChecksum) != 0)
    throw bad("checksum mismatch (corrupted or truncated)");
  Fields f;
  f.version = le::load<std::uint16_t>(id.bytes.data() + kOffVersion);
  if (f.version != wire::kProtocolVersion)
    throw bad("protocol version " + std::to_string(f.version) + ", this library speaks " +
              std::to_string(wire::kProtocolVersion));
  f.root.family = id.bytes[kOffFamily];
  if (f.root.family != 4 && f.root.family != 6) throw bad("address family byte " + std::to_string(f.root.family));
  std::memcpy(f.root.addr.data(), id.bytes.data() + kOffAddr, f.root.addr.size());
  f.root.port = le::load<std::uint16_t>(id.bytes.data() + kOffPort);
  if (f.root.port == 0) throw bad("root port 0");
  std::memcpy(f.secret.data(), id.bytes.data() + kOffSecret, f.secret.size());
  return f;
}

}  // namespace uid

std::string UniqueId::toString() const {
  static const char* digits = "0123456789abcdef";
  std::string s;
  s.reserve(kBytes * 2);
  for (unsigned char b : bytes) {
    s.push_back(digits[b >> 4]);
    s.push_back(digits[b & 15]);
  }
  return s;
}

UniqueId UniqueId::fromString(const std::string& text) {
  std::string t = text;
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
  if (t.size() != kBytes * 2)
    throw Error(ErrorCode::InvalidArgument, "invalid tether UniqueId: expected " + std::to_string(kBytes * 2) +
                                                " hex characters, got " + std::to_string(t.size()));
  auto nibble = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    throw Error(ErrorCode::InvalidArgument, std::string("invalid tether UniqueId: non-hex character '") + c + "'");
  };
  UniqueId id;
  for (std::size_t i = 0; i < kBytes; ++i)
    id.bytes[i] = static_cast<unsigned char>(nibble(t[2 * i]) << 4 | nibble(t[2 * i + 1]));
  uid::parse(id);  // validates
  return id;
}

std::uint16_t UniqueId::version() const { return uid::parse(*this).version; }

std::string UniqueId::rootHost() const { return toEndpoint(uid::parse(*this).root).address().to_string(); }

std::uint16_t UniqueId::rootPort() const { return uid::parse(*this).root.port; }

}  // namespace tether
