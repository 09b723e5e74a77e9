// tether/detail/wire/frame.hpp — the frame header, as every world's engine
// sees it: the 48-byte header in front of every message on a link (its
// byte codec: lib/wire/frame.hpp; layout: docs/wire-protocol.md), and how
// errors describe a frame. The in-process world's messages carry the same
// header, so both worlds name, match and check frames with one code.
// Header-only, C++17.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tether/detail/wire/op.hpp"

namespace tether {
namespace detail {
namespace wire {

constexpr std::uint32_t kMagic = 0x52485454;  // "TTHR" as little-endian bytes
constexpr std::uint16_t kProtocolVersion = 4;
constexpr std::size_t kHeaderBytes = 48;
// The root of a frame that belongs to no broadcast.
constexpr std::uint32_t kNoRoot = 0xffffffffu;
// Handshake and control frames are small; anything larger is hostile.
constexpr std::uint64_t kMaxControlPayload = 64 * 1024;

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

inline const char* kindName(Kind k) {
  static const char* const names[] = {"unknown",   "challenge", "hello",       "welcome",          "reject",
                                      "register",  "table",     "send",        "collective",       "abort",
                                      "goodbye",   "heartbeat", "goodbye-ack", "status-query",     "status-answer",
                                      "table-ack", "credit",    "table-query", "collective-credit"};
  const auto i = static_cast<std::size_t>(k);
  return i < sizeof names / sizeof names[0] ? names[i] : names[0];
}
inline bool isKnownKind(std::uint8_t k) { return k >= 1 && k <= 18; }

// Collective operation codes, carried in the tag field of Collective frames so a
// receiver can name the operation a peer is in.
using OpCode = coll::Op;
using coll::opName;

// The tag of a Collective frame: the operation code in the low 8 bits and,
// above them, the part number of a frame sent in parts because it is larger
// than TETHER_MAX_PAYLOAD_BYTES (docs/wire-protocol.md). 0 for a whole frame.
constexpr std::uint32_t kPartShift = 8;
constexpr std::uint64_t kMaxParts = 1ULL << (32 - kPartShift);
inline std::uint32_t opCodeOf(std::uint32_t tag) { return tag & ((1u << kPartShift) - 1); }
inline std::uint32_t partOf(std::uint32_t tag) { return tag >> kPartShift; }
inline std::uint32_t collectiveTag(std::uint32_t code, std::uint64_t part) {
  return code | static_cast<std::uint32_t>(part << kPartShift);
}

struct FrameHeader {
  Kind kind{};
  std::uint8_t flags = 0;
  std::uint64_t comm = 0;        // communicator id
  std::uint64_t coll = 0;        // collective id (P2P: sender's sequence number)
  std::uint32_t step = 0;        // step within the collective's algorithm
  std::uint32_t tag = 0;         // P2P: user tag; Collective: OpCode
  std::uint64_t length = 0;      // payload bytes that follow the header
  std::uint32_t root = kNoRoot;  // Collective: a broadcast's root (part of the matching key); else kNoRoot
};

// "allgather#12 step 2 (64 bytes)" / "send tag 7 (8 bytes)" — how errors name an operation.
inline std::string describe(const FrameHeader& h) {
  if (h.kind == Kind::Collective) {
    const std::string call = coll::callName(opName(static_cast<OpCode>(opCodeOf(h.tag))), h.coll);
    if (partOf(h.tag))
      return call + " step " + std::to_string(h.step) + " part " + std::to_string(partOf(h.tag)) + " (" +
             std::to_string(h.length) + " bytes)";
    return coll::stepFrame(call, h.step, h.length);
  }
  if (h.kind == Kind::P2P) return coll::sendTagFrame(h.tag, h.length);
  return std::string(kindName(h.kind)) + " frame (" + std::to_string(h.length) + " bytes)";
}

}  // namespace wire
}  // namespace detail
}  // namespace tether
