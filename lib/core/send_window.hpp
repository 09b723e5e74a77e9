// The point-to-point send window (docs/design.md, "Bounded point-to-point"):
// at most TETHER_P2P_WINDOW_BYTES of this rank's point-to-point messages to
// one peer that the peer has not received yet. A message costs its payload
// plus kMessageCost (what the receiver's stash spends on it beyond the
// payload), so empty messages count too. A message past the window waits on
// this side (its send waits with it) until the peer returns credit (a Credit
// frame) for messages it received; it never waits in the stream, so
// collective and control frames pass it. The peer's side: what it received,
// returned in batches of kCreditBatch, a quarter of the smallest window, so
// that ranks need not agree on the window. Progress thread only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

#include "base/layer.hpp"
#include "link/link.hpp"

TETHER_LAYER(6, "core");

namespace tether {

class SendWindow {
 public:
  // Measured: ~100 bytes of header, vector and queue slot per stashed message.
  static constexpr std::uint64_t kMessageCost = 128;
  static std::uint64_t cost(std::uint64_t payload) { return payload + kMessageCost; }
  // Credit is returned once this much is owed: a quarter of the smallest
  // window (TETHER_P2P_WINDOW_BYTES >= 64 KiB), one Credit frame per ~120
  // received 8-byte messages.
  static constexpr std::uint64_t kCreditBatch = 16 * 1024;
  static constexpr std::uint64_t kMinBytes = 4 * kCreditBatch;

  explicit SendWindow(std::uint64_t bytes) : bytes_(std::max(bytes, kMinBytes)) {}
  std::uint64_t bytes() const { return bytes_; }

  // ---- sending ----
  // A message of `payload` bytes to `peer` may go now (it is counted); false:
  // it must wait (hold()), behind any that already wait. A message always
  // goes while less than a quarter window is outstanding, however large.
  bool admit(int peer, std::uint64_t payload);
  // Keeps a frame that may not go yet; `frame.owner` waits for it.
  void hold(int peer, link::OutFrame frame);
  // `peer` received messages worth `bytes`: the frames that may go now, in order (counted).
  std::vector<link::OutFrame> credit(int peer, std::uint64_t bytes);
  // Drops `owner`'s waiting frames (it failed); returns how many.
  std::size_t drop(const link::Owner* owner);
  // The peer `owner` has a frame waiting for; -1 if none.
  int heldFor(const link::Owner* owner) const;
  // Owners with frames waiting for `peer`.
  std::vector<link::Owner*> ownersHeldFor(int peer) const;
  // Every owner with a waiting frame.
  std::vector<link::Owner*> ownersHeld() const;
  // What this rank sent to `peer` and `peer` has not received (counted bytes).
  std::uint64_t unreceived(int peer) const;
  // `peer` is gone: nothing is owed either way any more (its waiting frames are dropped).
  void forget(int peer);

  // ---- receiving ----
  // A message of `payload` bytes from `peer` was received (or dropped): the
  // credit to return to it now, 0 while less than kCreditBatch is owed.
  std::uint64_t received(int peer, std::uint64_t payload);

 private:
  bool fits(std::uint64_t outstanding, std::uint64_t cost) const;

  struct Peer {
    std::uint64_t outstanding = 0;  // sent, not yet credited
    std::deque<link::OutFrame> held;
    std::uint64_t owed = 0;  // received from the peer, not yet credited back
  };
  const std::uint64_t bytes_;
  std::unordered_map<int, Peer> peers_;  // only peers that exchanged messages
};

}  // namespace tether
