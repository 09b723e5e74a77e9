// tether/detail/core/window.hpp — the send windows' rule, shared by both
// worlds (docs/design.md, "Bounded point-to-point" and "Bounded
// collectives"): a rank may have sent one lane — a peer's point-to-point
// messages, or one communicator's collective frames to a peer — at most a
// window of frames the peer has not received; past it the next frame waits
// on the sender, and its call with it. The TCP world counts a lane in
// lib/core/send_window.*, returning credit in batches; the testing world
// counts it under its mutex (tether/testing/detail/world_state.hpp). The
// texts are the ones a timed-out send's error ends with. Header-only, C++17.
#pragma once

#include <cstdint>
#include <string>

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

}  // namespace window
}  // namespace core
}  // namespace detail
}  // namespace tether
