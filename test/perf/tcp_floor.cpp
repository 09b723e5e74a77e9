// tcp-floor: the least a non-spinning TCP exchange can cost on this machine.
// N forked ranks, plain blocking loopback TCP sockets (TCP_NODELAY), and the
// exchange with the fewest messages and hops:
//   allgather  every rank writes its block to rank 0, rank 0 writes the whole
//              buffer back (a star: N - 1 links, all at rank 0);
//   pingpong   rank 0 writes --bytes to rank 1, rank 1 writes them back (one
//              link; the figure is the whole round trip; ranks >= 2 idle).
// One write() per message, one blocking read() per message, no framing, no
// matching, no deadlines, no event loop. With --epoll, the least an event loop
// adds: each rank waits in epoll_wait over its links before it reads (the
// star's centre reads whichever child is ready), so a read follows each wait.
// Only the links the exchange uses are connected, so the star runs at 1,024
// ranks; --full-mesh connects every pair first (the set-up before issue 18:
// N(N-1)/2 connections, at most 128 ranks).
// Not a library, not a test: a reference line for tether-bench and mpi-bench
// (same options, same latency model, same JSON; see bench_common.hpp and
// docs/benchmarks.md).
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <cstring>
#include <memory>
#include <vector>

#include "bench_common.hpp"
#include "plain_socket.hpp"

namespace {

namespace testnet = tether::chaos::testnet;
using Clock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kSetupDeadline{30000};

using testnet::writeAll;

// The measured read: one plain blocking read() per message (no poll first,
// unlike testnet::readExact), so the floor is exactly write + read.
void readAll(int fd, void* p, std::size_t n) {
  auto* c = static_cast<char*>(p);
  while (n) {
    ssize_t k = ::read(fd, c, n);
    if (k <= 0) throw std::runtime_error(k == 0 ? "read: end of stream" : std::string("read: ") + std::strerror(errno));
    c += k;
    n -= static_cast<std::size_t>(k);
  }
}

constexpr int kMeshMostRanks = 128;  // --full-mesh: N(N-1)/2 connections, each N-1 sockets a rank

// Rank r's sockets: fd[p] is the stream to rank p. Rank r dials the lower
// ranks in `dial` and accepts `accepts` higher ones (each names itself in its
// first 4 bytes); only listeners[r] is used to accept.
std::vector<testnet::Fd> connectLinks(int r, int n, const std::vector<int>& dial, int accepts,
                                      const std::vector<testnet::Fd>& listeners,
                                      const std::vector<std::uint16_t>& ports) {
  std::vector<testnet::Fd> fd(static_cast<std::size_t>(n));
  for (int p : dial) {
    auto s = testnet::connectTo("127.0.0.1", ports[static_cast<std::size_t>(p)]);  // sets TCP_NODELAY
    writeAll(s.get(), &r, sizeof r);
    fd[static_cast<std::size_t>(p)] = std::move(s);
  }
  for (int k = 0; k < accepts; ++k) {
    auto s = testnet::acceptBefore(listeners[static_cast<std::size_t>(r)].get(), testnet::after(kSetupDeadline));
    int one = 1;
    ::setsockopt(s.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int who = -1;
    readAll(s.get(), &who, sizeof who);
    if (who <= r || who >= n || fd[static_cast<std::size_t>(who)])
      throw std::runtime_error("connectLinks: unexpected peer " + std::to_string(who));
    fd[static_cast<std::size_t>(who)] = std::move(s);
  }
  return fd;
}

// The ranks that take part: all for the all-gather, 0 and 1 for the ping-pong.
int participants(bench::Op op, int n) { return op == bench::Op::Pingpong ? 2 : n; }

std::vector<testnet::Fd> connectFor(bench::Op op, bool fullMesh, int r, int n,
                                    const std::vector<testnet::Fd>& listeners,
                                    const std::vector<std::uint16_t>& ports) {
  std::vector<int> dial;
  if (fullMesh) {
    for (int p = 0; p < r; ++p) dial.push_back(p);
    return connectLinks(r, n, dial, n - 1 - r, listeners, ports);
  }
  const int m = participants(op, n);
  if (r == 0) return connectLinks(r, n, dial, m - 1, listeners, ports);  // the star's centre
  if (r < m) dial.push_back(0);
  return connectLinks(r, n, dial, 0, listeners, ports);
}

// --epoll: one epoll set over a rank's links, made once (close-on-exec).
class Waiter {
 public:
  explicit Waiter(const std::vector<testnet::Fd>& fd) : ep_(::epoll_create1(EPOLL_CLOEXEC)) {
    if (ep_.get() < 0) throw std::runtime_error(std::string("epoll_create1: ") + std::strerror(errno));
    for (std::size_t p = 0; p < fd.size(); ++p) {
      if (!fd[p]) continue;
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u32 = static_cast<std::uint32_t>(p);
      if (::epoll_ctl(ep_.get(), EPOLL_CTL_ADD, fd[p].get(), &ev) != 0)
        throw std::runtime_error(std::string("epoll_ctl: ") + std::strerror(errno));
    }
  }
  // Waits until some link has bytes: the ranks whose links do (kept here, so
  // a call allocates nothing).
  const std::vector<int>& wait() {
    epoll_event events[kEvents];
    int k;
    while ((k = ::epoll_wait(ep_.get(), events, kEvents, -1)) < 0 && errno == EINTR) {
    }
    if (k < 0) throw std::runtime_error(std::string("epoll_wait: ") + std::strerror(errno));
    ready_.clear();
    for (int i = 0; i < k; ++i) ready_.push_back(static_cast<int>(events[i].data.u32));
    return ready_;
  }

 private:
  static constexpr int kEvents = 64;
  testnet::Fd ep_;
  std::vector<int> ready_ = std::vector<int>(kEvents);
};

void exchange(bench::Op op, int r, int n, std::size_t bytes, std::vector<char>& data,
              const std::vector<testnet::Fd>& fd, Waiter* waiter) {
  auto fdOf = [&](int p) { return fd[static_cast<std::size_t>(p)].get(); };
  auto waitFor = [&](int p) {  // --epoll: wait in epoll_wait until `p`'s link has bytes
    if (!waiter) return;
    for (;;) {
      const std::vector<int>& ready = waiter->wait();
      if (std::find(ready.begin(), ready.end(), p) != ready.end()) return;
    }
  };
  if (op == bench::Op::Pingpong) {
    const int peer = r == 0 ? 1 : 0;
    if (r == 0) writeAll(fdOf(1), data.data(), bytes);
    waitFor(peer);
    readAll(fdOf(peer), data.data(), bytes);
    if (r != 0) writeAll(fdOf(0), data.data(), bytes);
    return;
  }
  const std::size_t all = data.size();
  if (r == 0) {
    if (waiter) {  // whichever child is ready, until every block is in
      for (int left = n - 1; left > 0;) {
        const std::vector<int>& ready = waiter->wait();
        for (int p : ready) readAll(fdOf(p), data.data() + p * bytes, bytes);
        left -= static_cast<int>(ready.size());
      }
    } else {
      for (int p = 1; p < n; ++p) readAll(fdOf(p), data.data() + p * bytes, bytes);
    }
    for (int p = 1; p < n; ++p) writeAll(fdOf(p), data.data(), all);
  } else {
    writeAll(fdOf(0), data.data() + r * bytes, bytes);
    waitFor(0);
    readAll(fdOf(0), data.data(), all);
  }
}

void runRank(int r, const bench::Options& o, bench::Op op, std::size_t bytes, bool fullMesh, bool useEpoll,
             const std::vector<testnet::Fd>& listeners, const std::vector<std::uint16_t>& ports) {
  const int n = o.nranks;
  const int m = participants(op, n);
  auto setupStart = Clock::now();
  auto fd = connectFor(op, fullMesh, r, n, listeners, ports);
  const double initUs = std::chrono::duration<double, std::micro>(Clock::now() - setupStart).count();
  const long sockets = bench::openSockets();  // the links and the inherited listeners
  if (r >= m) return;                         // takes no part in the ping-pong
  std::vector<char> data(op == bench::Op::Pingpong ? bytes : static_cast<std::size_t>(n) * bytes, 1);
  std::vector<double> times(static_cast<std::size_t>(o.warmup + o.iters));
  std::unique_ptr<Waiter> waiter;
  if (useEpoll) waiter = std::make_unique<Waiter>(fd);
  double cpuStart = 0;
  for (std::size_t i = 0; i < times.size(); ++i) {
    if (i == static_cast<std::size_t>(o.warmup)) cpuStart = bench::cpuMicroseconds();
    auto start = Clock::now();
    exchange(op, r, n, bytes, data, fd, waiter.get());
    times[i] = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  }
  const double cpuPerCall = (bench::cpuMicroseconds() - cpuStart) / o.iters;
  // Record: [set-up time, open sockets, peak RSS, CPU per timed call, timed
  // iterations...], collected on rank 0.
  std::vector<double> record{initUs, static_cast<double>(sockets), static_cast<double>(bench::peakRssKb()), cpuPerCall};
  record.insert(record.end(), times.end() - o.iters, times.end());
  if (r != 0) {
    writeAll(fd[0].get(), record.data(), record.size() * sizeof(double));
    return;
  }
  bench::Result result;
  std::vector<std::vector<double>> perRank;
  std::vector<double> cpuPerRank;
  std::vector<double> theirs = record;
  for (int p = 0; p < m; ++p) {
    if (p > 0) readAll(fd[static_cast<std::size_t>(p)].get(), theirs.data(), theirs.size() * sizeof(double));
    result.initMs = std::max(result.initMs, theirs[0] / 1000.0);  // connecting the links
    result.maxFds = std::max(result.maxFds, static_cast<long>(theirs[1]));
    result.maxRssKb = std::max(result.maxRssKb, static_cast<long>(theirs[2]));
    cpuPerRank.push_back(theirs[3]);
    if (p == 0 || op != bench::Op::Pingpong) perRank.emplace_back(theirs.begin() + 4, theirs.end());  // rank 0 timed it
  }
  result.impl = "tcp-floor";
  result.op = op;
  result.nranks = n;
  result.bytes = bytes;
  result.iters = o.iters;
  result.firstUs = times.front();
  result.mode = useEpoll ? "epoll" : "blocking";
  bench::summarizeCpu(cpuPerRank, result);
  bench::summarize(perRank, result);
  bench::print(result, o.json);
}

// Forks the ranks of one (op, bytes) run and waits for them; throws if one failed.
void runOnce(const bench::Options& o, bench::Op op, std::size_t bytes, bool fullMesh, bool useEpoll) {
  // Only rank 0 accepts, except in the full mesh (every rank accepts its higher ones).
  std::vector<testnet::Fd> listeners(static_cast<std::size_t>(o.nranks));
  std::vector<std::uint16_t> ports(static_cast<std::size_t>(o.nranks));
  for (int r = 0; r < (fullMesh ? o.nranks : 1); ++r)
    listeners[static_cast<std::size_t>(r)] = testnet::listenOn("127.0.0.1", ports[static_cast<std::size_t>(r)]);
  std::vector<pid_t> children;
  for (int r = 0; r < o.nranks; ++r) {
    pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
    if (pid == 0) {
      try {
        runRank(r, o, op, bytes, fullMesh, useEpoll, listeners, ports);
        std::fflush(stdout);
        ::_exit(0);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "tcp-floor rank %d: %s\n", r, e.what());
        ::_exit(1);
      }
    }
    children.push_back(pid);
  }
  int failed = 0;
  for (pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  if (failed) throw std::runtime_error(std::to_string(failed) + " rank(s) failed");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    auto o = bench::parseOptions(
        "tcp-floor", argc, argv,
        {{"full-mesh", "connect every pair of ranks before the exchange (the old set-up; at most 128 ranks)"},
         {"epoll", "each rank waits in epoll_wait over its links before it reads (an event loop's least)"}});
    const bool fullMesh = o.flags.count("full-mesh") != 0;
    const bool useEpoll = o.flags.count("epoll") != 0;
    for (auto op : o.ops)
      if (op != bench::Op::Allgather && op != bench::Op::Pingpong)
        throw std::invalid_argument("tcp-floor measures --op allgather and pingpong only");
    if (fullMesh && o.nranks > kMeshMostRanks)
      throw std::invalid_argument("--full-mesh takes at most " + std::to_string(kMeshMostRanks) + " ranks");
    for (auto op : o.ops)
      for (std::size_t bytes : o.bytes) runOnce(o, op, bytes, fullMesh, useEpoll);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tcp-floor: %s\n", e.what());
    return 2;
  }
}
