// Internal logging: level from TETHER_DEBUG, rank prefix, fmt formatting,
// routed to the handler set with tether::setLogHandler.
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <string>
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

// A cause that repeats as fast as a loop retries it (an accept failing while
// this process is out of descriptors): one line when it starts, then at most
// one per `every`, saying how often it happened meanwhile. One thread.
class Repeats {
 public:
  explicit Repeats(std::chrono::milliseconds every = std::chrono::seconds(5)) : every_(every) {}
  // Whether to log `cause` now; `times`: how often it happened since its
  // last line, this time included (1: it has just started).
  bool due(const std::string& cause, int& times);

 private:
  std::chrono::milliseconds every_;
  std::string cause_;
  int count_ = 0;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace tether::log
