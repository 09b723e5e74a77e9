// tcp-floor: the least a non-spinning TCP all-gather can cost on this machine.
// N forked ranks, a full mesh of plain blocking loopback TCP sockets
// (TCP_NODELAY), and the all-gather with the fewest messages and hops: every
// rank writes its block to rank 0, rank 0 writes the whole buffer back. One
// write() per message, one blocking read() per message, no framing, no
// matching, no deadlines, no event loop. Not a library, not a test: a
// reference line for tether-bench and mpi-bench (same options, same latency
// model, same JSON; see bench_common.hpp and docs/benchmarks.md).
#include <netinet/in.h>
#include <netinet/tcp.h>
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

// Rank r's sockets: fd[p] is the stream to rank p. Rank r dials every lower
// rank and accepts every higher one (which names itself in its first 4 bytes).
std::vector<testnet::Fd> connectMesh(int r, int n, const std::vector<testnet::Fd>& listeners,
                                     const std::vector<std::uint16_t>& ports) {
  std::vector<testnet::Fd> fd(static_cast<std::size_t>(n));
  for (int p = 0; p < r; ++p) {
    auto s = testnet::connectTo("127.0.0.1", ports[static_cast<std::size_t>(p)]);  // sets TCP_NODELAY
    writeAll(s.get(), &r, sizeof r);
    fd[static_cast<std::size_t>(p)] = std::move(s);
  }
  for (int k = r + 1; k < n; ++k) {
    auto s = testnet::acceptBefore(listeners[static_cast<std::size_t>(r)].get(), testnet::after(kSetupDeadline));
    int one = 1;
    ::setsockopt(s.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int who = -1;
    readAll(s.get(), &who, sizeof who);
    if (who <= r || who >= n) throw std::runtime_error("connectMesh: unexpected peer " + std::to_string(who));
    fd[static_cast<std::size_t>(who)] = std::move(s);
  }
  return fd;
}

void runRank(int r, const bench::Options& o, std::size_t bytes, const std::vector<testnet::Fd>& listeners,
             const std::vector<std::uint16_t>& ports) {
  const int n = o.nranks;
  auto meshStart = Clock::now();
  auto fd = connectMesh(r, n, listeners, ports);
  const double initUs = std::chrono::duration<double, std::micro>(Clock::now() - meshStart).count();
  std::vector<char> data(static_cast<std::size_t>(n) * bytes, 1);
  const std::size_t all = data.size();
  std::vector<double> times(static_cast<std::size_t>(o.warmup + o.iters));
  for (auto& t : times) {
    auto start = Clock::now();
    if (r == 0) {
      for (int p = 1; p < n; ++p) readAll(fd[static_cast<std::size_t>(p)].get(), data.data() + p * bytes, bytes);
      for (int p = 1; p < n; ++p) writeAll(fd[static_cast<std::size_t>(p)].get(), data.data(), all);
    } else {
      writeAll(fd[0].get(), data.data() + r * bytes, bytes);
      readAll(fd[0].get(), data.data(), all);
    }
    t = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  }
  // Record: [mesh connect time, timed iterations...], collected on rank 0.
  std::vector<double> record{initUs};
  record.insert(record.end(), times.end() - o.iters, times.end());
  if (r != 0) {
    writeAll(fd[0].get(), record.data(), record.size() * sizeof(double));
    return;
  }
  double slowestInitUs = initUs;
  std::vector<std::vector<double>> perRank{std::vector<double>(record.begin() + 1, record.end())};
  for (int p = 1; p < n; ++p) {
    std::vector<double> theirs(record.size());
    readAll(fd[static_cast<std::size_t>(p)].get(), theirs.data(), theirs.size() * sizeof(double));
    slowestInitUs = std::max(slowestInitUs, theirs.front());
    perRank.emplace_back(theirs.begin() + 1, theirs.end());
  }
  bench::Result result;
  result.impl = "tcp-floor";
  result.op = bench::Op::Allgather;
  result.nranks = n;
  result.bytes = bytes;
  result.iters = o.iters;
  result.initMs = slowestInitUs / 1000.0;  // connecting the full mesh
  result.firstUs = times.front();
  bench::summarize(perRank, result);
  bench::print(result, o.json);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    auto o = bench::parseOptions("tcp-floor", argc, argv);
    for (auto op : o.ops)
      if (op != bench::Op::Allgather) throw std::invalid_argument("tcp-floor measures --op allgather only");
    for (std::size_t bytes : o.bytes) {
      std::vector<testnet::Fd> listeners;
      std::vector<std::uint16_t> ports(static_cast<std::size_t>(o.nranks));
      for (int r = 0; r < o.nranks; ++r)
        listeners.push_back(testnet::listenOn("127.0.0.1", ports[static_cast<std::size_t>(r)]));
      std::vector<pid_t> children;
      for (int r = 0; r < o.nranks; ++r) {
        pid_t pid = ::fork();
        if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
        if (pid == 0) {
          try {
            runRank(r, o, bytes, listeners, ports);
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
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tcp-floor: %s\n", e.what());
    return 2;
  }
}
