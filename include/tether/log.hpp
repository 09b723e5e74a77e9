// tether/log.hpp — where tether's diagnostics go.
//
// By default lines go to stderr, filtered by TETHER_DEBUG=NONE|WARN|INFO|TRACE
// (default WARN; another value is reported in a WARN line), each prefixed
// "[tether S.ssssss rank R LEVEL] " — S.ssssss: seconds since this process
// started, on the monotonic clock; "rank R" is missing before the rank is
// known. A runtime that routes logs itself installs a handler; the handler may
// be called from tether's progress threads and must be thread-safe.
#pragma once

#include <functional>
#include <string>

namespace tether {

enum class LogLevel { None = 0, Warn = 1, Info = 2, Trace = 3 };

// `line` is the full message including the "[tether ...]" prefix, without a
// newline. Lines reach the handler one at a time, in timestamp order.
using LogHandler = std::function<void(LogLevel level, const std::string& line)>;

// nullptr restores the default stderr handler.
void setLogHandler(LogHandler handler);
// Overrides TETHER_DEBUG for this process.
void setLogLevel(LogLevel level);
LogLevel logLevel();

}  // namespace tether
