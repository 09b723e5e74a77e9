// Runs a test body in a child process inside a fresh network namespace that
// only the child sees (unshare: it disappears with the child on every exit
// path), built by shell commands (ip link ...). No traffic leaves it. Needs
// root: a test's main() exits 77 with the reason otherwise.
#pragma once

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "tether/tether.hpp"

namespace tether::test {

inline bool sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0; }

struct Outcome {
  int code = -1;       // 0: body returned; 2: body threw; 3: setup failed
  std::string output;  // the body's result or the reason
};

// Runs `body` in a child inside a new network namespace built by `setup`;
// returns what body returned, with every log line (INFO and up) appended.
inline Outcome inNamespace(const std::vector<std::string>& setup, const std::function<std::string()>& body) {
  int p[2];
  if (::pipe(p) != 0) return {-1, "pipe failed"};
  pid_t pid = ::fork();
  if (pid < 0) return {-1, "fork failed"};
  if (pid == 0) {
    ::close(p[0]);
    auto report = [&](int code, const std::string& text) {
      (void)!::write(p[1], text.data(), text.size());
      ::_exit(code);
    };
    if (::unshare(CLONE_NEWNET) != 0) report(3, "unshare(CLONE_NEWNET) failed");
    for (const auto& cmd : setup)
      if (!sh(cmd)) report(3, "setup failed: " + cmd);
    std::string logs;
    setLogLevel(LogLevel::Info);
    setLogHandler([&](LogLevel, const std::string& line) { logs += line + "\n"; });
    try {
      auto result = body();
      report(0, result + "\n" + logs);
    } catch (const std::exception& e) {
      report(2, std::string("threw: ") + e.what() + "\n" + logs);
    }
  }
  ::close(p[1]);
  Outcome out;
  char buf[4096];
  ssize_t got;
  while ((got = ::read(p[0], buf, sizeof buf)) > 0) out.output.append(buf, static_cast<std::size_t>(got));
  ::close(p[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  out.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

inline std::string firstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

// Why this host cannot run namespace tests, or "" when it can (root, and a
// namespace with `setup` can be built).
inline std::string namespacesUnusable(const std::vector<std::string>& setup) {
  if (::geteuid() != 0) return "needs root to create network namespaces";
  auto probe = inNamespace(setup, [] { return std::string("ok"); });
  if (probe.code != 0) return "cannot build a test namespace here (" + firstLine(probe.output) + ")";
  return "";
}

}  // namespace tether::test
