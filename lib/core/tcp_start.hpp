// Starting a TcpBootstrap's world with the configuration read when it
// started (one settings::Values): the constructor reads it; fromEnvironment
// (lib/core/launch.cpp) passes the one it read for the launch, so a launch
// reads the environment once (docs/configuration.md, "Read once").
#pragma once

#include <chrono>
#include <memory>

#include "base/layer.hpp"
#include "base/settings.hpp"
#include "tether/tcp_bootstrap.hpp"

TETHER_LAYER(6, "core");

namespace tether {

// The world of rank `rank` of `nranks` (checked by the caller): TcpOptions
// first, `values` for what they leave at 0. Throws as the constructor does.
// The rendezvous deadline is `began` + the timeout: the caller's entry, so a
// construction ends at its deadline, not that plus the time spent before the
// world started (settings, interfaces: tens of ms on a loaded host).
std::shared_ptr<Communicator> startTcpWorld(
    int rank, int nranks, const UniqueId& id, const TcpOptions& options, const settings::Values& values,
    std::chrono::steady_clock::time_point began = std::chrono::steady_clock::now());

}  // namespace tether
