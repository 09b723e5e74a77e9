// Internal logging: level from TETHER_DEBUG, rank prefix, fmt formatting,
// routed to the handler set with tether::setLogHandler.
#pragma once

#include <fmt/format.h>

#include <string_view>

#include "tether/log.hpp"
#include "base/layer.hpp"

TETHER_LAYER(0, "base");

namespace tether::log {

bool enabled(LogLevel level);
void write(LogLevel level, int rank, std::string_view message);

template <class... Args>
void warn(int rank, fmt::format_string<Args...> f, Args&&... args) {
  if (enabled(LogLevel::Warn)) write(LogLevel::Warn, rank, fmt::format(f, std::forward<Args>(args)...));
}
template <class... Args>
void info(int rank, fmt::format_string<Args...> f, Args&&... args) {
  if (enabled(LogLevel::Info)) write(LogLevel::Info, rank, fmt::format(f, std::forward<Args>(args)...));
}
template <class... Args>
void trace(int rank, fmt::format_string<Args...> f, Args&&... args) {
  if (enabled(LogLevel::Trace)) write(LogLevel::Trace, rank, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace tether::log
