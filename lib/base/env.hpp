// Environment variables (all listed in docs/configuration.md).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "base/layer.hpp"

TETHER_LAYER(0, "base");

namespace tether::env {

// Unset and empty both read as nullopt.
std::optional<std::string> get(const char* name);
// Throws Error{InvalidArgument} naming the variable when it is not a number.
std::optional<std::int64_t> getInt(const char* name);
std::int64_t getInt(const char* name, std::int64_t fallback);
std::chrono::milliseconds getMs(const char* name, std::chrono::milliseconds fallback);

}  // namespace tether::env
