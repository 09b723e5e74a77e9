// tether/detail/core/send_windows.hpp — one rank's send windows, both
// worlds' (docs/design.md, "Bounded point-to-point" and "Bounded
// collectives"): at most a window of this rank's frames to one lane — a
// peer's point-to-point messages, or one communicator's collective frames to
// a peer — that the peer has not received yet (the rule and its numbers:
// window.hpp). A frame past it waits here, not in the stream, and its call
// (the frame's owner) with it, until the peer returns credit for frames it
// received; the receiving side returns credit in batches. The TCP world
// holds its outgoing frames (lib/core/calls_frames.cpp: credit comes in
// control frames), the testing world a copy of the message
// (tether/testing/detail/world_state.hpp: credit under its mutex); which
// frames go, wait, are dropped and are credited is this code in both.
// Not thread-safe. Header-only, C++17.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tether/detail/core/window.hpp"
#include "tether/detail/wire/frame.hpp"

namespace tether {
namespace detail {
namespace core {

// Whose frames share a window: point-to-point messages to a peer (comm 0:
// one lane per peer, whatever their communicator), or one communicator's
// collective frames to a peer.
struct Lane {
  Lane(int p, std::uint64_t c = 0) : peer(p), comm(c) {}  // NOLINT: a peer alone is a lane
  int peer;
  std::uint64_t comm;
  bool operator==(const Lane& o) const { return peer == o.peer && comm == o.comm; }
};
struct LaneHash {
  std::size_t operator()(const Lane& l) const {
    return std::hash<std::uint64_t>()(l.comm * 0x9E3779B97F4A7C15ULL ^ static_cast<std::uint32_t>(l.peer));
  }
};

// One window's lanes, and whose frames wait on them. `Frame` is a world's
// held frame; its `owner` (a pointer) is the call that waits for it.
template <class Frame>
class SendWindow {
 public:
  using Owner = decltype(Frame::owner);  // a pointer
  using ConstOwner = std::add_pointer_t<std::add_const_t<std::remove_pointer_t<Owner>>>;
  using BytesOf = std::uint64_t (*)(const Frame&);
  static constexpr std::uint64_t kMessageCost = window::kMessageCost;
  static std::uint64_t cost(std::uint64_t payload) { return window::cost(payload); }

  SendWindow(std::uint64_t bytes, std::uint64_t batch, BytesOf bytesOf) : lanes_(bytes, batch, bytesOf) {}
  std::uint64_t bytes() const { return lanes_.bytes(); }
  std::size_t lanes() const { return lanes_.size(); }  // lanes counted now

  // ---- sending ----
  // A frame of `payload` bytes on `lane` may go now (it is counted); false:
  // it must wait (hold()), behind any that already wait. A frame always goes
  // while less than a quarter window is outstanding, however large.
  bool admit(Lane lane, std::uint64_t payload) { return lanes_.admit(lane, payload); }
  // Keeps a frame that may not go yet; `frame.owner` waits for it.
  void hold(Lane lane, Frame frame) { lanes_.hold(lane, std::move(frame)); }
  // The peer received frames of `lane` worth `bytes`: the frames that may go
  // now go to `ready(Frame&&)`, in order (counted).
  template <class Ready>
  void credit(Lane lane, std::uint64_t bytes, Ready&& ready) {
    lanes_.credit(lane, bytes, std::forward<Ready>(ready));
  }
  // Drops `owner`'s waiting frames (it failed); returns how many.
  std::size_t drop(ConstOwner owner) {
    return lanes_.dropHeld([&](const Lane&, const Frame& f) { return f.owner == owner; });
  }
  // The lane `owner` has a frame waiting on, if any.
  std::optional<Lane> heldFor(ConstOwner owner) const {
    std::optional<Lane> lane;
    lanes_.forEachHeld([&](const Lane& l, const Frame& f) {
      if (f.owner == owner && !lane) lane = l;
    });
    return lane;
  }
  // Owners with frames waiting for `peer` (any lane).
  std::vector<Owner> ownersHeldFor(int peer) const {
    std::vector<Owner> owners;
    lanes_.forEachHeld([&](const Lane& l, const Frame& f) {
      if (l.peer == peer) owners.push_back(f.owner);
    });
    return owners;
  }
  // Every owner with a waiting frame.
  std::vector<Owner> ownersHeld() const {
    std::vector<Owner> owners;
    lanes_.forEachHeld([&](const Lane&, const Frame& f) { owners.push_back(f.owner); });
    return owners;
  }
  // What this rank sent on `lane` and the peer has not received (counted bytes).
  std::uint64_t unreceived(Lane lane) const { return lanes_.unreceived(lane); }
  // `peer` is gone: nothing is owed either way on its lanes any more (their waiting frames are dropped).
  void forget(int peer) {
    lanes_.eraseLanes([&](const Lane& l, bool) { return l.peer == peer; });
  }
  // Communicator `comm` ended here: its lanes go (but one a frame still
  // waits on, which its owner's failure drops).
  void forgetComm(std::uint64_t comm) {
    lanes_.eraseLanes([&](const Lane& l, bool nothingHeld) { return l.comm == comm && nothingHeld; });
  }

  // ---- receiving ----
  // A frame of `payload` bytes on `lane` (from its peer) was received (or
  // dropped): the credit to return now, 0 while less than a batch is owed.
  std::uint64_t received(Lane lane, std::uint64_t payload) { return lanes_.received(lane, payload); }

 private:
  window::Lanes<Lane, LaneHash, Frame> lanes_;
};

// A rank's two windows: point-to-point messages (a lane per peer,
// TETHER_P2P_WINDOW_BYTES) and collective frames (a lane per peer and
// communicator, a fixed window every rank agrees on), apart so that neither
// waits behind the other's held frames. `self`'s frames to itself are not
// counted.
template <class Frame>
struct SendWindows {
  using Window = SendWindow<Frame>;
  using Owner = typename Window::Owner;
  using ConstOwner = typename Window::ConstOwner;

  SendWindows(int self, std::uint64_t p2pBytes, typename Window::BytesOf bytesOf)
      : self(self),
        p2p(p2pBytes, window::kCreditBatch, bytesOf),
        coll(window::kCollectiveBytes, window::kCollectiveBatch, bytesOf) {}

  const int self;
  Window p2p;
  Window coll;

  // The window counting data frames of `kind`.
  Window& of(wire::Kind kind) { return kind == wire::Kind::Collective ? coll : p2p; }
  // The window and lane that count a frame `h` to or from `peer`; none
  // (null) for a frame to itself or one that carries no data.
  std::pair<Window*, Lane> of(int peer, const wire::FrameHeader& h) {
    if (peer == self) return {nullptr, Lane(peer)};
    if (h.kind == wire::Kind::P2P) return {&p2p, Lane(peer)};
    if (h.kind == wire::Kind::Collective) return {&coll, Lane(peer, h.comm)};
    return {nullptr, Lane(peer)};
  }

  // The peer `owner` has a frame waiting for, -1 if none.
  int heldPeer(ConstOwner owner) const {
    for (const Window* w : {&p2p, &coll})
      if (const auto lane = w->heldFor(owner)) return lane->peer;
    return -1;
  }
  // Why `owner`'s send waits, when a window holds it: ": it has not yet
  // received ... (TETHER_P2P_WINDOW_BYTES=...)" (window.hpp); "" otherwise.
  std::string heldNote(ConstOwner owner) const {
    if (const auto lane = p2p.heldFor(owner)) return window::p2pNote(p2p.unreceived(*lane), p2p.bytes());
    if (const auto lane = coll.heldFor(owner)) return window::collectiveNote(coll.unreceived(*lane), coll.bytes());
    return "";
  }
  // `owner` failed: its waiting frames are dropped (never sent).
  void drop(ConstOwner owner) {
    p2p.drop(owner);
    coll.drop(owner);
  }
  // Owners with frames waiting for `peer`, in either window.
  std::vector<Owner> ownersHeldFor(int peer) const {
    std::vector<Owner> owners = p2p.ownersHeldFor(peer);
    for (Owner o : coll.ownersHeldFor(peer)) owners.push_back(o);
    return owners;
  }
  // `peer` is gone: its lanes in both windows go, their frames dropped.
  void forget(int peer) {
    p2p.forget(peer);
    coll.forget(peer);
  }
};

}  // namespace core
}  // namespace detail
}  // namespace tether
