// Environment variables (all listed in docs/configuration.md).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/layer.hpp"

TETHER_LAYER(0, "base");

namespace tether::env {

// Unset and empty both read as nullopt.
std::optional<std::string> get(const char* name);
// Throws Error{InvalidArgument} naming the variable when it is not a number.
std::optional<std::int64_t> getInt(const char* name);
std::int64_t getInt(const char* name, std::int64_t fallback);
// A duration in milliseconds: unset or 0 reads as `fallback`; a negative value
// throws Error{InvalidArgument} naming the variable.
std::chrono::milliseconds getMs(const char* name, std::chrono::milliseconds fallback);
// The same rule for `text`, the value of variable `name`.
std::chrono::milliseconds parseMs(const char* name, const std::string& text, std::chrono::milliseconds fallback);

// Timeouts have one meaning everywhere (docs/configuration.md): 0 is the
// default — TETHER_TIMEOUT_MS when set, else tether::kDefaultTimeout — and a
// negative value is an error naming its source. Values beyond ten years are
// capped (no deadline arithmetic can overflow).
std::chrono::milliseconds defaultTimeout();
// `given` from a caller (TcpOptions::timeout, setTimeout); `source` names it
// in the error, e.g. "rank 2: setTimeout".
std::chrono::milliseconds resolveTimeout(std::chrono::milliseconds given, std::string_view source);

}  // namespace tether::env
