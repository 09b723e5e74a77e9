// tether/detail/defaults.hpp — defaults that every layer and both worlds
// share (base level: lib/base reads them without the public API above it).
// tether/bootstrap.hpp re-exports them. Header-only, C++17.
#pragma once

#include <chrono>
#include <cstdint>

namespace tether {

// The deadline of construction and of each blocking call when none is given:
// TETHER_TIMEOUT_MS overrides it. Everywhere a timeout is accepted
// (TcpOptions::timeout, setTimeout, TETHER_TIMEOUT_MS), 0 means this default
// (TETHER_TIMEOUT_MS when set, else kDefaultTimeout) and a negative value is
// rejected with Error{InvalidArgument} naming where it came from.
inline constexpr std::chrono::milliseconds kDefaultTimeout{300000};

namespace detail {
// TETHER_P2P_WINDOW_BYTES: its default, least and largest value (the
// window's rule: tether/detail/core/window.hpp).
inline constexpr std::uint64_t kP2PWindowBytes = 4ULL << 20;
inline constexpr std::uint64_t kMinP2PWindowBytes = 64 * 1024;
inline constexpr std::uint64_t kMaxP2PWindowBytes = 1ULL << 40;
// TETHER_MAX_PAYLOAD_BYTES (the largest data frame a receiver accepts): its
// default, least and largest value.
inline constexpr std::uint64_t kMaxPayloadBytes = 1ULL << 30;
inline constexpr std::uint64_t kMinMaxPayloadBytes = 64 * 1024;
inline constexpr std::uint64_t kMaxMaxPayloadBytes = 1ULL << 40;
}  // namespace detail

}  // namespace tether
