// stress_run.cpp — forks the ranks, enforces the run's deadline, parses reports.
#include "stress_run.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <sstream>
#include <stdexcept>

#include "stress_rank.hpp"
#include "tether/error.hpp"
#include "tether/tcp_bootstrap.hpp"

namespace tether::stress {

std::uint64_t StressResult::ops() const {
  std::uint64_t n = 0;
  for (auto& r : ranks) n += r.ops;
  return n;
}
std::uint64_t StressResult::blocks() const {
  std::uint64_t n = 0;
  for (auto& r : ranks) n += r.blocks;
  return n;
}
std::uint64_t StressResult::mismatches() const {
  std::uint64_t n = 0;
  for (auto& r : ranks) n += r.mismatches;
  return n;
}
bool StressResult::allOk() const {
  for (auto& r : ranks) {
    if (!r.ok) return false;
  }
  return !ranks.empty();
}

chaos::ChaosOptions defaultStressChaos() {
  chaos::ChaosOptions o;
  o.seed = 1;
  o.shuffleAccepts = true;
  o.shuffleBatch = 4;
  o.shuffleWindowMs = 3;
  o.holdNewConnMs = {0, 20};
  o.fragmentBytes = {1, 1024};
  o.delayPiecesUs = {0, 20};
  o.stallProbability = 0.0005;
  o.stallMs = {1, 10};
  return o;
}

namespace {

UniqueId makeId(const StressConfig& config) {
  if (config.netns.empty()) return TcpBootstrap::createUniqueId(config.rootHost + ":0");
  // Reserve rank 0's port inside its namespace: the socket stays there after we leave.
  int home = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  if (home < 0) throw std::runtime_error("cannot open /proc/self/ns/net");
  enterNetns(config.netns[0]);
  UniqueId id;
  try {
    id = TcpBootstrap::createUniqueId(config.rootHost + ":0");
  } catch (...) {
    ::setns(home, CLONE_NEWNET);
    ::close(home);
    throw;
  }
  int rc = ::setns(home, CLONE_NEWNET);
  ::close(home);
  if (rc != 0) throw std::runtime_error("cannot return to the original network namespace");
  return id;
}

void parseReport(RankReport& report, const std::string& text) {
  std::istringstream in(text);
  std::string line;
  bool sawOps = false;
  while (std::getline(in, line)) {
    auto space = line.find(' ');
    auto word = line.substr(0, space);
    auto rest = space == std::string::npos ? std::string() : line.substr(space + 1);
    if (word == "OPS") {
      report.ops = std::stoull(rest);
      sawOps = true;
    } else if (word == "BLOCKS") {
      report.blocks = std::stoull(rest);
    } else if (word == "MISMATCHES") {
      report.mismatches = std::stoull(rest);
    } else if (word == "BYTES") {
      report.bytes = std::stoull(rest);
    } else if (word == "MISMATCH") {
      report.mismatchLines.push_back(rest);
    } else if (word == "ERROR") {
      report.error += rest;
    }
  }
  if (!sawOps && report.error.empty()) report.error = "no report";
}

}  // namespace

StressResult runStress(const StressConfig& config) {
  if (config.nranks < 1) throw std::invalid_argument("nranks must be >= 1");
  UniqueId id = makeId(config);
  const int n = config.nranks;
  std::vector<pid_t> pids(n, -1);
  std::vector<int> fds(n, -1);
  auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < n; ++r) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
    pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      ::close(p[0]);
      std::string report;
      int code = 0;
      try {
        report = rankBody(r, id, config);
      } catch (const Error& e) {
        report = std::string("ERROR tether::Error[") + toString(e.code()) + "]: " + e.what() + "\n";
        code = 1;
      } catch (const std::exception& e) {
        report = std::string("ERROR ") + e.what() + "\n";
        code = 1;
      }
      const char* p0 = report.data();
      std::size_t left = report.size();
      while (left > 0) {
        ssize_t w = ::write(p[1], p0, left);
        if (w <= 0) break;
        p0 += w;
        left -= static_cast<std::size_t>(w);
      }
      ::_exit(code);
    }
    ::close(p[1]);
    pids[r] = pid;
    fds[r] = p[0];
  }
  TcpBootstrap::forgetUniqueId(id);

  StressResult result;
  result.ranks.resize(n);
  std::vector<std::string> text(n);
  std::vector<bool> eof(n, false);
  int open = n;
  auto end = start + config.deadline;
  while (open > 0) {
    std::vector<pollfd> pfds;
    std::vector<int> which;
    for (int r = 0; r < n; ++r) {
      if (!eof[r]) {
        pfds.push_back({fds[r], POLLIN, 0});
        which.push_back(r);
      }
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()).count();
    if (left <= 0) break;
    int rc = ::poll(pfds.data(), pfds.size(), static_cast<int>(std::min<long long>(left, 1000)));
    if (rc < 0 && errno != EINTR) break;
    for (std::size_t i = 0; rc > 0 && i < pfds.size(); ++i) {
      if (!pfds[i].revents) continue;
      char buf[4096];
      ssize_t got = ::read(fds[which[i]], buf, sizeof buf);
      if (got > 0) {
        text[which[i]].append(buf, static_cast<std::size_t>(got));
      } else {
        eof[which[i]] = true;
        --open;
      }
    }
  }
  for (int r = 0; r < n; ++r) {
    auto& report = result.ranks[r];
    report.rank = r;
    if (!eof[r]) ::kill(pids[r], SIGKILL);
    int status = 0;
    ::waitpid(pids[r], &status, 0);
    ::close(fds[r]);
    parseReport(report, text[r]);
    if (!eof[r])
      report.error = "killed at the run's deadline (" + std::to_string(config.deadline.count()) + " s)";
    else if (WIFSIGNALED(status))
      report.error += " died of signal " + std::to_string(WTERMSIG(status));
    report.ok = report.error.empty() && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace tether::stress
