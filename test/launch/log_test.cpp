// Log lines: a monotonic timestamp (seconds since the process started) and
// the rank in every line; a TETHER_DEBUG value tether does not know is
// reported instead of being ignored.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <regex>
#include <string>
#include <vector>

#include "base/log.hpp"
#include "tether/tether.hpp"

using namespace tether;

namespace {

// Runs this test program again with only `testName` and extra environment
// assignments; returns what it wrote to stderr and stdout.
std::string runSelf(const std::string& envAssignments, const std::string& testName) {
  char self[4096] = {};
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  REQUIRE(n > 0);
  std::string cmd =
      "env " + envAssignments + " '" + std::string(self, static_cast<std::size_t>(n)) + "' '" + testName + "' 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p);
  std::string out;
  char buf[4096];
  std::size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, got);
  int status = ::pclose(p);
  INFO(out);
  REQUIRE(status == 0);
  return out;
}

struct Captured {
  Captured() {
    setLogHandler([this](LogLevel level, const std::string& line) { lines.push_back({level, line}); });
  }
  ~Captured() { setLogHandler(nullptr); }
  std::vector<std::pair<LogLevel, std::string>> lines;
};

}  // namespace

TEST_CASE("log-level child: reads TETHER_DEBUG", "[.child]") { (void)logLevel(); }

TEST_CASE("an unknown TETHER_DEBUG value is reported, not ignored", "[log]") {
  auto out = runSelf("TETHER_DEBUG=VERBOSE", "log-level child: reads TETHER_DEBUG");
  INFO(out);
  CHECK(out.find("WARN") != std::string::npos);
  CHECK(out.find("TETHER_DEBUG='VERBOSE'") != std::string::npos);
}

TEST_CASE("a known TETHER_DEBUG value logs nothing about itself", "[log]") {
  auto out = runSelf("TETHER_DEBUG=info", "log-level child: reads TETHER_DEBUG");
  CHECK(out.find("TETHER_DEBUG='") == std::string::npos);
  CHECK(out.find("WARN") == std::string::npos);
}

TEST_CASE("every log line carries seconds since the process started, the rank and the level", "[log]") {
  auto saved = logLevel();
  setLogLevel(LogLevel::Info);
  {
    Captured c;
    log::info(3, "hello {}", 42);
    log::warn(-1, "no rank yet");
    REQUIRE(c.lines.size() == 2);
    INFO(c.lines[0].second);
    INFO(c.lines[1].second);
    CHECK(c.lines[0].first == LogLevel::Info);
    CHECK(std::regex_match(c.lines[0].second, std::regex(R"(\[tether \d+\.\d{6} rank 3 INFO\] hello 42)")));
    CHECK(std::regex_match(c.lines[1].second, std::regex(R"(\[tether \d+\.\d{6} WARN\] no rank yet)")));
    // The process started moments ago, not at boot or at the epoch.
    double t = std::stod(c.lines[0].second.substr(8));
    CHECK(t >= 0.0);
    CHECK(t < 3600.0);
  }
  setLogLevel(saved);
}

TEST_CASE("log timestamps never go backwards", "[log]") {
  auto saved = logLevel();
  setLogLevel(LogLevel::Warn);
  Captured c;
  for (int i = 0; i < 50; ++i) log::warn(0, "line {}", i);
  setLogLevel(saved);
  double last = -1;
  for (const auto& [level, line] : c.lines) {
    double t = std::stod(line.substr(8));
    CHECK(t >= last);
    last = t;
  }
}
