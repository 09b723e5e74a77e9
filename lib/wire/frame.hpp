// The frame header's byte codec: 48 bytes, little-endian, in front of every
// message on a link. Byte layout and meaning: docs/wire-protocol.md.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "base/layer.hpp"
#include "tether/detail/wire/frame.hpp"

TETHER_LAYER(1, "wire");

namespace tether::wire {

// The header, its kinds and how errors describe a frame are every world's
// (tether/detail/wire/frame.hpp); the byte codec is here.
using detail::wire::collectiveTag;
using detail::wire::describe;
using detail::wire::FrameHeader;
using detail::wire::isKnownKind;
using detail::wire::kHeaderBytes;
using detail::wire::Kind;
using detail::wire::kindName;
using detail::wire::kMagic;
using detail::wire::kMaxControlPayload;
using detail::wire::kMaxParts;
using detail::wire::kNoRoot;
using detail::wire::kPartShift;
using detail::wire::kProtocolVersion;
using detail::wire::OpCode;
using detail::wire::opCodeOf;
using detail::wire::opName;
using detail::wire::partOf;

using HeaderBytes = std::array<unsigned char, kHeaderBytes>;

void encodeHeader(const FrameHeader& h, unsigned char* out);
HeaderBytes encodeHeader(const FrameHeader& h);

// Decoding checks magic, version, kind and the length limit; on failure it
// returns nullopt and says why in `why`.
std::optional<FrameHeader> decodeHeader(const unsigned char* in, std::uint64_t maxPayload, std::string* why);

}  // namespace tether::wire

// `fmt::format("{}", header)` gives describe(header). Passing the header
// itself (not describe(h)) to a log call defers the formatting until the log
// level is known to be on. No format specs: GCC 12 at -O3 misreports fmt's
// runtime spec parser (formatter<string>::parse) as a stringop-overflow.
template <>
struct fmt::formatter<tether::wire::FrameHeader> {
  constexpr auto parse(format_parse_context& ctx) { return ctx.begin(); }
  auto format(const tether::wire::FrameHeader& h, format_context& ctx) const {
    const std::string text = tether::wire::describe(h);
    return std::copy(text.begin(), text.end(), ctx.out());
  }
};
