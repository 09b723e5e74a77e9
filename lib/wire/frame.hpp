// The frame header: 48 bytes, little-endian, in front of every message on a
// link. Byte layout and meaning: docs/wire-protocol.md.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "base/layer.hpp"
#include "tether/detail/wire/op.hpp"

TETHER_LAYER(1, "wire");

namespace tether::wire {

inline constexpr std::uint32_t kMagic = 0x52485454;  // "TTHR" as little-endian bytes
inline constexpr std::uint16_t kProtocolVersion = 4;
inline constexpr std::size_t kHeaderBytes = 48;
// The root of a frame that belongs to no broadcast.
inline constexpr std::uint32_t kNoRoot = 0xffffffffu;
// Handshake and control frames are small; anything larger is hostile.
inline constexpr std::uint64_t kMaxControlPayload = 64 * 1024;

enum class Kind : std::uint8_t {
  Challenge = 1,          // acceptor -> dialer: nonce
  Hello = 2,              // dialer -> acceptor: who I am + proof of the secret
  Welcome = 3,            // acceptor -> dialer: proof of the secret, link is up
  Reject = 4,             // acceptor -> dialer: why the link is refused
  Register = 5,           // rank -> root: my listen address
  Table = 6,              // root -> rank: every rank's listen address
  P2P = 7,                // user send/recv
  Collective = 8,         // one step of a collective
  Abort = 9,              // the world is aborted: origin, reason, lost rank (wire/notice.hpp)
  Goodbye = 10,           // orderly close follows
  Heartbeat = 11,         // liveness; no payload
  GoodbyeAck = 12,        // every frame before the goodbye has been read; the sender may close
  StatusQuery = 13,       // a timed-out collective asks where the peer is (wire/notice.hpp)
  StatusAnswer = 14,      // the answer
  TableAck = 15,          // host leader -> its parent in the leaders' tree: its subtree holds the table; no payload
  Credit = 16,            // point-to-point messages received: their cost back to the sender's window (wire/notice.hpp)
  TableQuery = 17,        // an observer (tether-status) -> a rank: send the address table; no payload
  CollectiveCredit = 18,  // one communicator's collective frames received: their cost back to the sender's window
};

// Collective operation codes, carried in the tag field of Collective frames so a
// receiver can name the operation a peer is in.
using OpCode = detail::coll::Op;
using detail::coll::opName;

// The tag of a Collective frame: the operation code in the low 8 bits and,
// above them, the part number of a frame sent in parts because it is larger
// than TETHER_MAX_PAYLOAD_BYTES (docs/wire-protocol.md). 0 for a whole frame.
inline constexpr std::uint32_t kPartShift = 8;
inline constexpr std::uint64_t kMaxParts = 1ULL << (32 - kPartShift);
inline std::uint32_t opCodeOf(std::uint32_t tag) { return tag & ((1u << kPartShift) - 1); }
inline std::uint32_t partOf(std::uint32_t tag) { return tag >> kPartShift; }
inline std::uint32_t collectiveTag(std::uint32_t code, std::uint64_t part) {
  return code | static_cast<std::uint32_t>(part << kPartShift);
}

const char* kindName(Kind k);
bool isKnownKind(std::uint8_t k);

struct FrameHeader {
  Kind kind{};
  std::uint8_t flags = 0;
  std::uint64_t comm = 0;    // communicator id
  std::uint64_t coll = 0;    // collective id (P2P: sender's sequence number)
  std::uint32_t step = 0;    // step within the collective's algorithm
  std::uint32_t tag = 0;     // P2P: user tag; Collective: OpCode
  std::uint64_t length = 0;  // payload bytes that follow the header
  std::uint32_t root = kNoRoot;  // Collective: a broadcast's root (part of the matching key); else kNoRoot
};

using HeaderBytes = std::array<unsigned char, kHeaderBytes>;

void encodeHeader(const FrameHeader& h, unsigned char* out);
HeaderBytes encodeHeader(const FrameHeader& h);

// Decoding checks magic, version, kind and the length limit; on failure it
// returns nullopt and says why in `why`.
std::optional<FrameHeader> decodeHeader(const unsigned char* in, std::uint64_t maxPayload, std::string* why);

// "allgather#12 step 2 (64 bytes)" / "send tag 7 #3 (8 bytes)" — how errors name an operation.
std::string describe(const FrameHeader& h);

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
