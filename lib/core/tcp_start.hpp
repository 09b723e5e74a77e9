// Starting a TcpBootstrap's world with the configuration read when it
// started (one settings::Values): the constructor reads it; fromEnvironment
// (lib/core/launch.cpp) passes the one it read for the launch, so a launch
// reads the environment once (docs/configuration.md, "Read once").
#pragma once

#include <memory>

#include "base/layer.hpp"
#include "base/settings.hpp"
#include "tether/tcp_bootstrap.hpp"

TETHER_LAYER(6, "core");

namespace tether {

// The world of rank `rank` of `nranks` (checked by the caller): TcpOptions
// first, `values` for what they leave at 0. Throws as the constructor does.
std::shared_ptr<Communicator> startTcpWorld(int rank, int nranks, const UniqueId& id, const TcpOptions& options,
                                            const settings::Values& values);

}  // namespace tether
