// tether/detail/core/frame_calls.hpp — what the shared call table
// (call_table.hpp) and sequence guard (sequence_guard.hpp) know of frames,
// written once for every world: frames carry the wire's header
// (tether/detail/wire/frame.hpp) and match under its full key
// (tether/detail/match/key.hpp), naming their sender by its world rank;
// errors name ranks by the communicator's (rank_names.hpp).
//
// `CallT` is a world's call: its communicator, collective id, wire operation
// code and root (`comm`, `coll`, `code`, `root`), its communicator's
// sequence `seq` (a pointer, or a shared one), its name (`name()`) and how
// its errors name ranks (`names`, a pointer to its RankNames).
// `SeqT`: that sequence, with the communicator's `names`. Header-only, C++17.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "tether/detail/core/failures.hpp"
#include "tether/detail/match/key.hpp"
#include "tether/detail/match/mailbox.hpp"
#include "tether/detail/wire/frame.hpp"
#include "tether/error.hpp"

namespace tether {
namespace detail {
namespace core {

template <class CallT, class SeqT>
struct FrameCalls {
  using Call = CallT;
  using Key = match::Key;
  using Header = wire::FrameHeader;
  using Stashed = match::StashedFrame<Header>;
  using Mailbox = match::Mailbox<Key, match::KeyHash, match::PostedReceive, Stashed>;  // lib/match/mailbox.hpp's
  using Seq = SeqT;

  // ---- the call table's ----
  static Key keyOf(int src, const Header& h) { return match::keyOf(static_cast<std::uint32_t>(src), h); }
  static int sourceOf(const Key& k) { return static_cast<int>(k.src); }
  static std::size_t lengthOf(const Header& h) { return static_cast<std::size_t>(h.length); }
  // False: a duplicate (match::stashedOnce), dropped.
  static bool stash(Mailbox& box, const Key& k, Stashed&& f) { return box.stash(k, std::move(f)); }
  static std::optional<std::uint32_t> tagOf(const Key& k) {
    return k.kind == wire::Kind::P2P ? std::optional<std::uint32_t>(k.tag) : std::nullopt;
  }
  static std::uint32_t stepOf(const Key& k) { return k.step; }
  // Protocol: frame `h` from world rank `src` is not the size `c`'s receive
  // expects ("rank 0 sent send tag 3 (8 bytes), this rank expects 16 bytes").
  static std::exception_ptr lengthMismatch(const Call& c, int src, const Header& h, std::size_t expected) {
    return std::make_exception_ptr(
        Error(ErrorCode::Protocol,
              failures::failure(c.names->who(), c.name(),
                                failures::expectsBytes(c.names->nameOfWorld(src), wire::describe(h), expected)),
              c.names->rank(), c.names->rankOf(src)));
  }

  // ---- the frames calls send and the keys they receive under ----
  // Part `part` of collective `c`'s frame of step `step`, `length` bytes.
  static Header collectiveFrame(const Call& c, std::uint32_t step, std::uint64_t part, std::uint64_t length) {
    Header h;
    h.kind = wire::Kind::Collective;
    h.comm = c.comm;
    h.coll = c.coll;
    h.step = step;
    h.tag = wire::collectiveTag(c.code, part);
    h.length = length;
    h.root = c.root;
    return h;
  }
  // The parts that carry `bytes` of one of `c`'s collective frames, each at
  // most `max` bytes (TETHER_MAX_PAYLOAD_BYTES, the largest a receiver
  // accepts; at least 1), sent and received as
  //   for (std::uint64_t i = 0; i < p.count; ++i) ... part i: p.offset(i), p.length(i)
  // So a valid call never fails on the limit, whatever an algorithm combines
  // into one frame; the receiver, which knows the size, posts the same parts.
  struct Parts {
    std::uint64_t count, bytes, max;
    std::uint64_t offset(std::uint64_t part) const { return part * max; }
    std::uint64_t length(std::uint64_t part) const { return std::min(max, bytes - part * max); }
  };
  // Throws InvalidArgument past wire::kMaxParts parts.
  static Parts partsOf(const Call& c, std::uint64_t bytes, std::uint64_t max) {
    const std::uint64_t parts = bytes <= max ? 1 : (bytes + max - 1) / max;
    if (parts > wire::kMaxParts)
      throw Error(ErrorCode::InvalidArgument,
                  failures::failure(c.names->who(), c.name(),
                                    "a frame of " + std::to_string(bytes) + " bytes needs " + std::to_string(parts) +
                                        " parts of TETHER_MAX_PAYLOAD_BYTES=" + std::to_string(max) + " (at most " +
                                        std::to_string(wire::kMaxParts) + "); raise TETHER_MAX_PAYLOAD_BYTES"),
                  c.names->rank());
    return Parts{parts, bytes, max};
  }
  // The key that part of that frame from world rank `src` has.
  static Key collectiveKey(const Call& c, int src, std::uint32_t step, std::uint64_t part) {
    return keyOf(src, collectiveFrame(c, step, part, 0));
  }
  // A point-to-point message of communicator `comm` with `tag`, `length` bytes.
  static Header sendFrame(std::uint64_t comm, int tag, std::uint64_t length) {
    Header h;
    h.kind = wire::Kind::P2P;
    h.comm = comm;
    h.tag = static_cast<std::uint32_t>(tag);
    h.length = length;
    return h;
  }
  // The key such a message from world rank `src` has.
  static Key sendKey(int src, std::uint64_t comm, int tag) { return keyOf(src, sendFrame(comm, tag, 0)); }

  // ---- the sequence guard's ----
  static std::uint64_t commOf(const Header& h) { return h.comm; }
  static std::uint64_t collOf(const Header& h) { return h.coll; }
  static Seq* seqOf(const Call& c) { return rawSeq(c.seq); }
  static std::uint64_t collOf(const Call& c) { return c.coll; }
  static std::string nameOf(const Call& c) { return c.name(); }
  static bool ofCall(const Key& k, const Call& c) {
    return k.kind == wire::Kind::Collective && k.comm == c.comm && k.coll == c.coll;
  }
  static std::string describe(const Header& h) { return wire::describe(h); }
  // Frames name their sender by its world rank; errors by the communicator's.
  static int sourceRank(const Seq& seq, int src) { return seq.names.rankOf(src); }
  static std::string sourceName(const Seq& seq, int src) { return seq.names.nameOfWorld(src); }
  // Why frame `h` from `src` cannot be part of collective `c` at its id: another
  // operation, or a broadcast from another root ("" if neither).
  static std::string foreignText(const std::string& src, const Header& h, const Call& c) {
    if (wire::opCodeOf(h.tag) != c.code) return failures::differentCollectives(src, wire::describe(h));
    if (h.root != c.root)
      return failures::differentRoots(src, coll::callName(wire::opName(static_cast<wire::OpCode>(c.code)), h.coll),
                                      static_cast<int>(h.root), static_cast<int>(c.root));
    return std::string();
  }

 private:
  static Seq* rawSeq(Seq* s) { return s; }
  static Seq* rawSeq(const std::shared_ptr<Seq>& s) { return s.get(); }
};

}  // namespace core
}  // namespace detail
}  // namespace tether
