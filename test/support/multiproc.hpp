// Forked local ranks for tests: each rank is a child process running `body`;
// the parent collects exit status and any error text, and kills every child
// at the deadline so a hang becomes a failure, never a stuck test.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tether/tcp_bootstrap.hpp"

namespace tether::test {

struct RankResult {
  int rank = 0;
  int exitCode = -1;  // -1: killed or did not exit
  int signal = 0;
  bool timedOut = false;
  std::string output;  // what the child reported (error text)
};

// Throws from a child to report a failed expectation with a message.
inline void expect(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error("expectation failed: " + what);
}

// Ranks forked and running (startRanks); collectRanks waits for them.
struct StartedRanks {
  int n = 0;
  std::vector<pid_t> pids;
  std::vector<int> fds;  // each child's report pipe
  std::chrono::steady_clock::time_point end;  // when collectRanks kills what is left
};

// Forks n ranks running `body` and returns at once: a test that asks the
// running ranks forks them from its own (single) thread — a sanitizer such
// as TSan does not support a child forked while other threads run.
inline StartedRanks startRanks(int n, const std::function<void(int rank, const UniqueId& id)>& body,
                               std::chrono::milliseconds deadline = std::chrono::seconds(60),
                               const std::string& root = "127.0.0.1:0") {
  UniqueId id = TcpBootstrap::createUniqueId(root);
  std::vector<pid_t> pids(n);
  std::vector<int> fds(n);
  for (int r = 0; r < n; ++r) {
    int p[2];
    if (::pipe(p) != 0) throw std::runtime_error("pipe failed");
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(p[0]);
      int code = 0;
      std::string msg;
      try {
        body(r, id);
      } catch (const Error& e) {
        msg = std::string("tether::Error[") + toString(e.code()) + "]: " + e.what();
        code = 1;
      } catch (const std::exception& e) {
        msg = e.what();
        code = 1;
      }
      if (!msg.empty()) (void)!::write(p[1], msg.data(), msg.size());
      ::close(p[1]);
      ::_exit(code);
    }
    ::close(p[1]);
    pids[r] = pid;
    fds[r] = p[0];
  }
  TcpBootstrap::forgetUniqueId(id);
  return StartedRanks{n, std::move(pids), std::move(fds), std::chrono::steady_clock::now() + deadline};
}

// Waits for started ranks until their deadline, then kills what is left.
inline std::vector<RankResult> collectRanks(StartedRanks started) {
  const int n = started.n;
  auto& pids = started.pids;
  auto& fds = started.fds;
  const auto end = started.end;
  std::vector<RankResult> results(n);
  int open = n;
  std::vector<bool> eof(n, false);
  while (open > 0) {
    std::vector<pollfd> pfds;
    std::vector<int> idx;
    for (int r = 0; r < n; ++r)
      if (!eof[r]) {
        pfds.push_back({fds[r], POLLIN, 0});
        idx.push_back(r);
      }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()).count();
    if (left <= 0) break;
    int rc = ::poll(pfds.data(), pfds.size(), static_cast<int>(left));
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) break;
    for (std::size_t i = 0; i < pfds.size(); ++i) {
      if (!pfds[i].revents) continue;
      char buf[4096];
      ssize_t got = ::read(fds[idx[i]], buf, sizeof buf);
      if (got > 0)
        results[idx[i]].output.append(buf, static_cast<std::size_t>(got));
      else {
        eof[idx[i]] = true;
        --open;
      }
    }
  }
  for (int r = 0; r < n; ++r) {
    results[r].rank = r;
    if (!eof[r]) {
      results[r].timedOut = true;
      ::kill(pids[r], SIGKILL);
    }
    int status = 0;
    ::waitpid(pids[r], &status, 0);
    if (WIFEXITED(status)) results[r].exitCode = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) results[r].signal = WTERMSIG(status);
    if (results[r].timedOut) results[r].exitCode = -1;
    ::close(fds[r]);
  }
  return results;
}

inline std::vector<RankResult> runRanks(int n, const std::function<void(int rank, const UniqueId& id)>& body,
                                        std::chrono::milliseconds deadline = std::chrono::seconds(60),
                                        const std::string& root = "127.0.0.1:0") {
  return collectRanks(startRanks(n, body, deadline, root));
}

inline std::string summary(const std::vector<RankResult>& results) {
  std::ostringstream out;
  for (const auto& r : results)
    out << "rank " << r.rank << ": exit " << r.exitCode << (r.signal ? " signal " + std::to_string(r.signal) : "")
        << (r.timedOut ? " (killed at the test deadline)" : "") << (r.output.empty() ? "" : " — " + r.output) << "\n";
  return out.str();
}

inline bool allOk(const std::vector<RankResult>& results) {
  for (const auto& r : results)
    if (r.exitCode != 0) return false;
  return true;
}

// Runs `body` in a forked child (one that may enter namespaces: this process
// stays where it is) and returns its exit code (1 when killed or it threw;
// 77: skipped, by convention); `text` gets what it printed.
inline int inChild(const std::function<int()>& body, std::string& text) {
  int out[2];
  if (::pipe(out) != 0) return 1;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::close(out[0]);
    int code = 1;
    try {
      code = body();
    } catch (const std::exception& e) {
      std::printf("harness failed: %s\n", e.what());
    }
    std::fflush(stdout);
    ::_exit(code);
  }
  ::close(out[1]);
  char buf[4096];
  ssize_t got;
  while ((got = ::read(out[0], buf, sizeof buf)) > 0) text.append(buf, static_cast<std::size_t>(got));
  ::close(out[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace tether::test
