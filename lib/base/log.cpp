#include "base/log.hpp"

#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <sstream>

#include "base/descriptors.hpp"
#include "base/settings.hpp"

namespace tether {
namespace {

LogLevel levelFromEnv() {
  auto v = settings::text("TETHER_DEBUG");  // process-wide: read once, at the first log line
  if (!v) return LogLevel::Warn;
  std::string s = *v;
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (s == "NONE" || s == "OFF") return LogLevel::None;
  if (s == "WARN") return LogLevel::Warn;
  if (s == "INFO") return LogLevel::Info;
  if (s == "TRACE") return LogLevel::Trace;
  log::write(LogLevel::Warn, -1,
             fmt::format("TETHER_DEBUG='{}' is not NONE, WARN, INFO or TRACE; logging at WARN", *v));
  return LogLevel::Warn;
}

// How long this process has been running, from its start time in
// /proc/self/stat (clock ticks after boot) and CLOCK_BOOTTIME; 0 if unknown.
std::chrono::duration<double> processAge() {
  std::istringstream in(fds::readFile("/proc/self/stat"));
  std::string stat;
  std::getline(in, stat);
  auto close = stat.rfind(')');  // the command name may contain spaces and parentheses
  if (close == std::string::npos) return {};
  std::istringstream fields(stat.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
  }  // field 22: starttime
  timespec boot{};
  long ticks = ::sysconf(_SC_CLK_TCK);
  if (!fields || ticks <= 0 || ::clock_gettime(CLOCK_BOOTTIME, &boot) != 0) return {};
  double age = static_cast<double>(boot.tv_sec) + boot.tv_nsec / 1e9 - std::stod(field) / static_cast<double>(ticks);
  return std::chrono::duration<double>(age > 0 ? age : 0);
}

// Seconds since the process started, on the monotonic clock.
double secondsSinceStart() {
  using Clock = std::chrono::steady_clock;
  static const Clock::time_point start = Clock::now() - std::chrono::duration_cast<Clock::duration>(processAge());
  return std::chrono::duration<double>(Clock::now() - start).count();
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
    case LogLevel::Warn:
      return "WARN";
    case LogLevel::Info:
      return "INFO";
    case LogLevel::Trace:
      return "TRACE";
    default:
      return "";
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
  std::lock_guard lock(handlerMutex());  // lines leave in the order of their timestamps
  double t = secondsSinceStart();
  std::string line = rank >= 0 ? fmt::format("[tether {:.6f} rank {} {}] {}", t, rank, levelName(level), message)
                               : fmt::format("[tether {:.6f} {}] {}", t, levelName(level), message);
  if (handlerStore()) {
    handlerStore()(level, line);
  } else {
    line.push_back('\n');
    std::fwrite(line.data(), 1, line.size(), stderr);
  }
}

bool Repeats::due(const std::string& cause, int& times) {
  const auto now = std::chrono::steady_clock::now();
  if (cause != cause_) {  // a new cause: its first line now
    cause_ = cause;
    count_ = 0;
    last_ = now - every_;
  }
  ++count_;
  if (now - last_ < every_) return false;
  times = count_;
  count_ = 0;
  last_ = now;
  return true;
}

}  // namespace log
}  // namespace tether
