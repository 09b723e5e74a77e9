// Send windows (docs/design.md, "Bounded point-to-point" and "Bounded
// collectives"): at most a window of this rank's frames to one lane — a peer,
// and for collective frames a peer and a communicator — that the peer has not
// received yet. A frame costs its payload plus kMessageCost (what the
// receiver's stash spends on it beyond the payload), so empty frames count
// too. A frame past the window waits on this side (its call waits with it)
// until the peer returns credit for frames it received; it never waits in the
// stream, so other lanes' frames and control frames pass it. The peer's side:
// what it received, returned in batches (a quarter of the smallest window, so
// that ranks need not agree on the window). Progress thread only.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "base/layer.hpp"
#include "link/link.hpp"
#include "tether/detail/core/window.hpp"

TETHER_LAYER(6, "core");

namespace tether {

// Whose frames share a window: point-to-point messages to a peer (comm 0:
// one lane per peer, whatever their communicator), or one communicator's
// collective frames to a peer.
struct Lane {
  Lane(int p, std::uint64_t c = 0) : peer(p), comm(c) {}  // NOLINT: a peer alone is a lane
  int peer;
  std::uint64_t comm;
  bool operator==(const Lane& o) const { return peer == o.peer && comm == o.comm; }
};

class SendWindow {
 public:
  // The rule and its numbers are both worlds' (tether/detail/core/window.hpp).
  static constexpr std::uint64_t kMessageCost = detail::core::window::kMessageCost;
  static std::uint64_t cost(std::uint64_t payload) { return detail::core::window::cost(payload); }
  static constexpr std::uint64_t kCreditBatch = detail::core::window::kCreditBatch;
  static constexpr std::uint64_t kMinBytes = detail::core::window::kMinBytes;
  static constexpr std::uint64_t kCollectiveBytes = detail::core::window::kCollectiveBytes;
  static constexpr std::uint64_t kCollectiveBatch = detail::core::window::kCollectiveBatch;

  explicit SendWindow(std::uint64_t bytes, std::uint64_t batch = kCreditBatch)
      : lanes_(bytes, batch, [](const link::OutFrame& f) -> std::uint64_t { return f.len; }) {}
  std::uint64_t bytes() const { return lanes_.bytes(); }

  // ---- sending ----
  // A frame of `payload` bytes on `lane` may go now (it is counted); false:
  // it must wait (hold()), behind any that already wait. A frame always goes
  // while less than a quarter window is outstanding, however large.
  bool admit(Lane lane, std::uint64_t payload) { return lanes_.admit(lane, payload); }
  // Keeps a frame that may not go yet; `frame.owner` waits for it.
  void hold(Lane lane, link::OutFrame frame) { lanes_.hold(lane, std::move(frame)); }
  // The peer received frames of `lane` worth `bytes`: the frames that may go now, in order (counted).
  std::vector<link::OutFrame> credit(Lane lane, std::uint64_t bytes);
  // Drops `owner`'s waiting frames (it failed); returns how many.
  std::size_t drop(const link::Owner* owner);
  // The lane `owner` has a frame waiting on, if any.
  std::optional<Lane> heldFor(const link::Owner* owner) const;
  // Owners with frames waiting for `peer` (any lane).
  std::vector<link::Owner*> ownersHeldFor(int peer) const;
  // Every owner with a waiting frame.
  std::vector<link::Owner*> ownersHeld() const;
  // What this rank sent on `lane` and the peer has not received (counted bytes).
  std::uint64_t unreceived(Lane lane) const { return lanes_.unreceived(lane); }
  // `peer` is gone: nothing is owed either way on its lanes any more (their waiting frames are dropped).
  void forget(int peer);
  // Communicator `comm` ended here: its lanes go (but one a frame still
  // waits on, which its owner's failure drops).
  void forgetComm(std::uint64_t comm);

  // ---- receiving ----
  // A frame of `payload` bytes on `lane` (from its peer) was received (or
  // dropped): the credit to return now, 0 while less than a batch is owed.
  std::uint64_t received(Lane lane, std::uint64_t payload) { return lanes_.received(lane, payload); }

 private:
  struct LaneHash {
    std::size_t operator()(const Lane& l) const {
      return std::hash<std::uint64_t>()(l.comm * 0x9E3779B97F4A7C15ULL ^ static_cast<std::uint32_t>(l.peer));
    }
  };
  detail::core::window::Lanes<Lane, LaneHash, link::OutFrame> lanes_;
};

// A world's windows: point-to-point messages (a lane per peer) and collective
// frames (a lane per peer and communicator), apart so that neither waits
// behind the other's held frames.
struct SendWindows {
  explicit SendWindows(std::uint64_t p2pBytes) : p2p(p2pBytes) {}
  SendWindow p2p;
  SendWindow coll{SendWindow::kCollectiveBytes, SendWindow::kCollectiveBatch};
};

}  // namespace tether
