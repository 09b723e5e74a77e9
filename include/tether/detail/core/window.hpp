// tether/detail/core/window.hpp — the send windows' rule, shared by both
// worlds (docs/design.md, "Bounded point-to-point" and "Bounded
// collectives"): a rank may have sent one lane — a peer's point-to-point
// messages, or one communicator's collective frames to a peer — at most a
// window of frames the peer has not received; past it the next frame waits
// on the sender, and its call with it. Lanes (below) counts them, for both
// worlds (a rank's windows: send_windows.hpp); in both a receiver returns
// credit once a batch is owed.
// The texts are the ones a timed-out send's error ends with. Header-only, C++17.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <utility>

#include "tether/detail/defaults.hpp"

namespace tether {
namespace detail {
namespace core {
namespace window {

// A frame costs its payload plus this (measured: ~100 bytes of header,
// vector and queue slot per stashed message), so empty frames count too.
constexpr std::uint64_t kMessageCost = 128;
inline std::uint64_t cost(std::uint64_t payload) { return payload + kMessageCost; }

// Point-to-point: TETHER_P2P_WINDOW_BYTES, at least kMinBytes; the TCP world
// returns credit once kCreditBatch is owed, a quarter of the smallest window.
constexpr std::uint64_t kCreditBatch = 16 * 1024;
constexpr std::uint64_t kMinBytes = kMinP2PWindowBytes;
static_assert(kMinBytes == 4 * kCreditBatch, "the credit batch is a quarter of the smallest window");
constexpr std::uint64_t kP2PBytes = kP2PWindowBytes;  // TETHER_P2P_WINDOW_BYTES's default
// Collectives: a fixed window per communicator and peer, so that every rank
// agrees on it; its credit batch is a quarter of it.
constexpr std::uint64_t kCollectiveBytes = 4ULL << 20;
constexpr std::uint64_t kCollectiveBatch = kCollectiveBytes / 4;

// A frame of `cost` may go on a lane with `outstanding` unreceived: within
// the window, or while less than a quarter window is outstanding (however
// large the frame: the receiver keeps up to a quarter window of credit
// before it returns it, so a frame must not wait while no more than that is
// outstanding — it could wait for credit that never comes).
inline bool fits(std::uint64_t outstanding, std::uint64_t cost, std::uint64_t window) {
  return outstanding < window / 4 || outstanding + cost <= window;
}

// What a held send waits for: "waiting to send to rank 1 (host:port)", then
// one of the notes below.
inline std::string waitingToSend(const std::string& peer) { return "waiting to send to " + peer; }
inline std::string p2pNote(std::uint64_t unreceived, std::uint64_t window) {
  return ": it has not yet received " + std::to_string(unreceived) +
         " bytes of this rank's point-to-point messages, the most it may hold (TETHER_P2P_WINDOW_BYTES=" +
         std::to_string(window) + ", counting each message's payload plus " + std::to_string(kMessageCost) + " bytes)";
}
inline std::string collectiveNote(std::uint64_t unreceived, std::uint64_t window) {
  return ": it has not yet received " + std::to_string(unreceived) +
         " bytes of this rank's collective frames on this communicator, the most it may hold (" +
         std::to_string(window) + " bytes, counting each frame's payload plus " + std::to_string(kMessageCost) +
         " bytes)";
}

// One rank's lanes of one window. Per lane: what it sent that the peer has
// not received (counted), the frames held back behind it, in order, and on
// the receiving side what it received and has not credited back yet. `Held`
// is a world's frame; `bytesOf` its payload's size. Not thread-safe.
template <class Lane, class Hash, class Held>
class Lanes {
 public:
  using BytesOf = std::uint64_t (*)(const Held&);
  Lanes(std::uint64_t bytes, std::uint64_t batch, BytesOf bytesOf)
      : bytes_(std::max(bytes, 4 * batch)), batch_(batch), bytesOf_(bytesOf) {}
  std::uint64_t bytes() const { return bytes_; }
  std::size_t size() const { return lanes_.size(); }  // lanes counted now

  // ---- sending ----
  // A frame of `payload` bytes on `lane` may go now (it is counted); false:
  // it must wait (hold()), behind any that already wait.
  bool admit(const Lane& lane, std::uint64_t payload) {
    State& s = lanes_[lane];
    const std::uint64_t c = cost(payload);
    if (!s.held.empty() || !fits(s.outstanding, c, bytes_)) return false;
    s.outstanding += c;
    return true;
  }
  void hold(const Lane& lane, Held frame) { lanes_[lane].held.push_back(std::move(frame)); }
  // The peer received frames of `lane` costing `bytes`: the held frames that
  // fit now go to `ready(Held&&)`, in order (counted). `ready` may credit
  // again (the testing world delivers into a posted receive, which credits):
  // a nested call only counts, the outer one goes on releasing.
  template <class Ready>
  void credit(const Lane& lane, std::uint64_t bytes, Ready&& ready) {
    auto it = lanes_.find(lane);
    if (it == lanes_.end()) return;
    State& s = it->second;  // stays put: map nodes do not move
    s.outstanding -= std::min(bytes, s.outstanding);
    if (s.releasing) return;
    s.releasing = true;
    while (!s.held.empty()) {
      const std::uint64_t c = cost(bytesOf_(s.held.front()));
      if (!fits(s.outstanding, c, bytes_)) break;
      s.outstanding += c;
      Held frame = std::move(s.held.front());
      s.held.pop_front();
      ready(std::move(frame));
    }
    s.releasing = false;
  }
  // Drops the held frames `drop(lane, frame)` picks; returns how many.
  template <class Pred>
  std::size_t dropHeld(Pred&& drop) {
    std::size_t n = 0;
    for (auto& entry : lanes_) {
      auto& held = entry.second.held;
      const std::size_t before = held.size();
      held.erase(std::remove_if(held.begin(), held.end(), [&](const Held& f) { return drop(entry.first, f); }),
                 held.end());
      n += before - held.size();
    }
    return n;
  }
  // Calls `fn(lane, frame)` for every held frame.
  template <class Fn>
  void forEachHeld(Fn&& fn) const {
    for (const auto& entry : lanes_)
      for (const Held& f : entry.second.held) fn(entry.first, f);
  }
  // What this rank sent on `lane` and the peer has not received (counted bytes).
  std::uint64_t unreceived(const Lane& lane) const {
    auto it = lanes_.find(lane);
    return it == lanes_.end() ? 0 : it->second.outstanding;
  }
  // Forgets the lanes `erase(lane, nothingHeld)` picks (their held frames too).
  template <class Pred>
  void eraseLanes(Pred&& erase) {
    for (auto it = lanes_.begin(); it != lanes_.end();)
      it = erase(it->first, it->second.held.empty()) ? lanes_.erase(it) : std::next(it);
  }

  // ---- receiving ----
  // A frame of `payload` bytes on `lane` (from its peer) was received (or
  // dropped): the credit to return now, 0 while less than a batch is owed.
  std::uint64_t received(const Lane& lane, std::uint64_t payload) {
    State& s = lanes_[lane];
    s.owed += cost(payload);
    if (s.owed < batch_) return 0;
    return std::exchange(s.owed, 0);
  }

 private:
  struct State {
    std::uint64_t outstanding = 0;  // sent, not yet credited
    std::deque<Held> held;
    std::uint64_t owed = 0;  // received from the peer, not yet credited back
    bool releasing = false;  // credit() is releasing held frames
  };
  const std::uint64_t bytes_, batch_;
  const BytesOf bytesOf_;
  std::unordered_map<Lane, State, Hash> lanes_;  // only lanes that carried frames
};

}  // namespace window
}  // namespace core
}  // namespace detail
}  // namespace tether
