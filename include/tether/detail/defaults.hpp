// tether/detail/defaults.hpp — defaults that every layer and both worlds
// share (base level: lib/base reads them without the public API above it).
// tether/bootstrap.hpp re-exports them. Header-only, C++17.
#pragma once

#include <chrono>

namespace tether {

// The deadline of construction and of each blocking call when none is given:
// TETHER_TIMEOUT_MS overrides it. Everywhere a timeout is accepted
// (TcpOptions::timeout, setTimeout, TETHER_TIMEOUT_MS), 0 means this default
// (TETHER_TIMEOUT_MS when set, else kDefaultTimeout) and a negative value is
// rejected with Error{InvalidArgument} naming where it came from.
inline constexpr std::chrono::milliseconds kDefaultTimeout{300000};

}  // namespace tether
