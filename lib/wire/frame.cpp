#include "wire/frame.hpp"

#include "base/bytes.hpp"

#include <fmt/format.h>

#include <cstring>

namespace tether::wire {
void encodeHeader(const FrameHeader& h, unsigned char* out) {
  le::store<std::uint32_t>(out + 0, kMagic);
  le::store<std::uint16_t>(out + 4, kProtocolVersion);
  out[6] = static_cast<unsigned char>(h.kind);
  out[7] = h.flags;
  le::store<std::uint64_t>(out + 8, h.comm);
  le::store<std::uint64_t>(out + 16, h.coll);
  le::store<std::uint32_t>(out + 24, h.step);
  le::store<std::uint32_t>(out + 28, h.tag);
  le::store<std::uint64_t>(out + 32, h.length);
  le::store<std::uint32_t>(out + 40, h.root);
  le::store<std::uint32_t>(out + 44, 0);  // reserved
}

HeaderBytes encodeHeader(const FrameHeader& h) {
  HeaderBytes b;
  encodeHeader(h, b.data());
  return b;
}

std::optional<FrameHeader> decodeHeader(const unsigned char* in, std::uint64_t maxPayload, std::string* why) {
  auto fail = [&](std::string reason) -> std::optional<FrameHeader> {
    if (why) *why = std::move(reason);
    return std::nullopt;
  };
  auto magic = le::load<std::uint32_t>(in + 0);
  if (magic != kMagic) return fail(fmt::format("bad magic 0x{:08x}", magic));
  auto version = le::load<std::uint16_t>(in + 4);
  if (version != kProtocolVersion)
    return fail(fmt::format("protocol version {} (this side speaks {})", version, kProtocolVersion));
  if (!isKnownKind(in[6])) return fail(fmt::format("unknown frame kind {}", in[6]));
  FrameHeader h;
  h.kind = static_cast<Kind>(in[6]);
  h.flags = in[7];
  h.comm = le::load<std::uint64_t>(in + 8);
  h.coll = le::load<std::uint64_t>(in + 16);
  h.step = le::load<std::uint32_t>(in + 24);
  h.tag = le::load<std::uint32_t>(in + 28);
  h.length = le::load<std::uint64_t>(in + 32);
  h.root = le::load<std::uint32_t>(in + 40);
  if (const auto reserved = le::load<std::uint32_t>(in + 44); reserved != 0)
    return fail(fmt::format("reserved header bytes 0x{:08x} (must be 0)", reserved));
  bool control = h.kind != Kind::P2P && h.kind != Kind::Collective && h.kind != Kind::Table;
  std::uint64_t limit = control ? std::min(maxPayload, kMaxControlPayload) : maxPayload;
  if (h.length > limit)
    return fail(fmt::format("{} frame claims {} payload bytes (limit {})", kindName(h.kind), h.length, limit));
  return h;
}

}  // namespace tether::wire
