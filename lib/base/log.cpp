#include "base/log.hpp"

#include <atomic>
#include <cstdio>
#include <mutex>

#include "base/env.hpp"

namespace tether {
namespace {

LogLevel levelFromEnv() {
  auto v = env::get("TETHER_DEBUG");
  if (!v) return LogLevel::Warn;
  std::string s = *v;
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (s == "NONE" || s == "OFF") return LogLevel::None;
  if (s == "INFO") return LogLevel::Info;
  if (s == "TRACE") return LogLevel::Trace;
  return LogLevel::Warn;
}

std::atomic<int>& levelStore() {
  static std::atomic<int> level{static_cast<int>(levelFromEnv())};
  return level;
}

std::mutex& handlerMutex() {
  static std::mutex m;
  return m;
}

LogHandler& handlerStore() {
  static LogHandler handler;
  return handler;
}

const char* levelName(LogLevel l) {
  switch (l) {
    case LogLevel::Warn: return "WARN";
    case LogLevel::Info: return "INFO";
    case LogLevel::Trace: return "TRACE";
    default: return "";
  }
}

}  // namespace

void setLogHandler(LogHandler handler) {
  std::lock_guard lock(handlerMutex());
  handlerStore() = std::move(handler);
}

void setLogLevel(LogLevel level) { levelStore().store(static_cast<int>(level)); }

LogLevel logLevel() { return static_cast<LogLevel>(levelStore().load()); }

namespace log {

bool enabled(LogLevel level) {
  return level != LogLevel::None && static_cast<int>(level) <= levelStore().load(std::memory_order_relaxed);
}

void write(LogLevel level, int rank, std::string_view message) {
  std::string line = rank >= 0 ? fmt::format("tether[rank {}] {} {}", rank, levelName(level), message)
                               : fmt::format("tether {} {}", levelName(level), message);
  std::lock_guard lock(handlerMutex());
  if (handlerStore()) {
    handlerStore()(level, line);
  } else {
    line.push_back('\n');
    std::fwrite(line.data(), 1, line.size(), stderr);
  }
}

}  // namespace log
}  // namespace tether
