// tether-bench: init time and per-op latency of TcpBootstrap with N local ranks.
//
//   tether-bench --nranks 8 --op allgather --bytes 64 --iters 1000 [--json]
//                [--poll | --ucc] [--poll-rank0] [--print-uid]
//
// --poll: each call is the nonblocking one (iallgather, ialltoall, ibarrier,
// isend/irecv; broadcast has none and stays blocking) finished by a tight
// test() loop; --ucc: UCC's out-of-band pattern, about 1 us of the caller's
// own work between tests and the request freed when done; --poll-rank0: only
// rank 0 polls, the others block (what a poller costs its peers).
//
// Makes the unique id before forking (TcpBootstrap::createUniqueId binds the
// root port now, so the forked rank 0 adopts it without a race), forks one
// process per rank and waits for them with a deadline. Each rank times every
// iteration itself; after the loop the timings go to rank 0 over the bootstrap
// and rank 0 prints the statistics (bench_common.hpp explains them), with the
// init phases (TcpBootstrap::initTimings) of rank 0 and of the slowest rank,
// and what the timed calls counted (TcpBootstrap::counters): calls of rank 0,
// frames and payload bytes all ranks sent (each rank's own sends, counted in
// its own calls: exact), and the links' dials, re-dials and budget closes.
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include <tether/tether.hpp>

#include "bench_common.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using bench::Op;

double microsecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

long peakSockets = 0;  // this rank's, sampled after init and after each op's first and last call

// How a rank finishes each call (--poll, --ucc).
enum class Mode { Blocking, Poll, Ucc };

// This process's user + system CPU time (all its threads), in microseconds.
// Tests until done; under Ucc about 1 us of the caller's own work between
// tests. The request is freed when it goes out of scope (UCC's req_free).
void finish(tether::Request request, Mode mode, double& tests) {
  for (;;) {
    ++tests;
    if (request.test()) return;
    if (mode == Mode::Ucc) {
      const auto until = Clock::now() + std::chrono::microseconds(1);
      while (Clock::now() < until) {
      }
    }
  }
}

// The timed calls' CPU time and tests (polling modes), this rank's.
struct Cost {
  double cpuUs = 0;
  double tests = 0;
};

// One call of `op` in `mode` (pingpong's half of rank 0 or 1).
void callOp(tether::Bootstrap& b, Op op, Mode mode, std::size_t bytes, std::vector<unsigned char>& data,
            std::vector<unsigned char>& received, double& tests) {
  const int pingTag = 1;
  const bool poll = mode != Mode::Blocking;
  switch (op) {
    case Op::Allgather:
      if (poll) return finish(b.iallgather(data.data(), bytes), mode, tests);
      return b.allgather(data.data(), bytes);
    case Op::Alltoall:
      if (poll) return finish(b.ialltoall(data.data(), received.data(), bytes), mode, tests);
      return b.alltoall(data.data(), received.data(), bytes);
    case Op::Barrier:
      if (poll) return finish(b.ibarrier(), mode, tests);
      return b.barrier();
    case Op::Broadcast:  // no nonblocking broadcast
      return b.broadcast(data.data(), bytes, 0);
    case Op::Sendrecv:
    case Op::Pingpong: {
      if (b.rank() > 1) return;
      const int peer = 1 - b.rank();
      auto send = [&] {
        poll ? finish(b.isend(data.data(), bytes, peer, pingTag), mode, tests)
             : b.send(data.data(), bytes, peer, pingTag);
      };
      auto recv = [&] {
        poll ? finish(b.irecv(data.data(), bytes, peer, pingTag), mode, tests)
             : b.recv(data.data(), bytes, peer, pingTag);
      };
      if (b.rank() == 0) send();
      recv();
      if (b.rank() == 1) send();
      return;
    }
  }
}

// Times `count` back-to-back calls of `op`; entry i is this rank's time for
// call i. `cost`: CPU time and tests of the calls after the first `warmup`.
std::vector<double> timeOp(tether::Bootstrap& b, Op op, Mode mode, std::size_t bytes, int count, int warmup,
                           Cost& cost) {
  const std::size_t n = static_cast<std::size_t>(b.size());
  std::vector<unsigned char> data(op == Op::Allgather || op == Op::Alltoall ? n * bytes : bytes, 1);
  std::vector<unsigned char> received(op == Op::Alltoall ? n * bytes : 0);
  std::vector<double> times(static_cast<std::size_t>(count), 0.0);
  double cpuStart = 0, tests = 0;
  for (int i = 0; i < count; ++i) {
    if (i == warmup) {
      cpuStart = bench::cpuMicroseconds();
      tests = 0;
    }
    const auto start = Clock::now();
    callOp(b, op, mode, bytes, data, received, tests);
    times[static_cast<std::size_t>(i)] = microsecondsSince(start);
    if (op == Op::Sendrecv) times[static_cast<std::size_t>(i)] /= 2;  // half round trip (pingpong: all of it)
    // After the first call (it opens the op's links) and the last: reading
    // /proc/self/fd after every call costs ~100 syscalls, and the gap lets the
    // progress thread take over between calls (a slower, different benchmark).
    if (i == 0 || i == count - 1) peakSockets = std::max(peakSockets, bench::openSockets());
  }
  cost.cpuUs = bench::cpuMicroseconds() - cpuStart;
  cost.tests = tests;
  return times;
}

// Rank 0 collects every rank's record (init time, then per-iteration times).
std::vector<std::vector<double>> gatherToRoot(tether::Bootstrap& b, const std::vector<double>& mine) {
  const int gatherTag = 2;
  std::vector<std::vector<double>> all;
  if (b.rank() != 0) {
    b.send(mine.data(), mine.size() * sizeof(double), 0, gatherTag);
    return all;
  }
  all.push_back(mine);
  for (int r = 1; r < b.size(); ++r) {
    std::vector<double> theirs(mine.size());
    b.recv(theirs.data(), theirs.size() * sizeof(double), r, gatherTag);
    all.push_back(std::move(theirs));
  }
  return all;
}

// Header of a rank's record: [init, first call, peak sockets, peak RSS, start
// stamp, init end stamp, CPU of the timed calls, their tests, 6 init phases
// (ms; -1: absent), 6 counts (calls, frames sent, bytes sent, dials,
// re-dials, budget closes)]; the timed calls follow.
constexpr std::size_t kPhases = 6, kCounts = 6, kHead = 8 + kPhases + kCounts;

void appendPhases(const tether::InitTimings& t, std::vector<double>& record) {
  for (const auto& p : {t.listen, t.hostLocal, t.registered, t.tableReceived, t.firstLink, t.total})
    record.push_back(p ? static_cast<double>(p->count()) / 1000.0 : -1.0);
}

std::uint64_t allCalls(const tether::Counters& c) {
  return c.allgather + c.alltoall + c.alltoallv + c.broadcast + c.barrier + c.subsetBarrier + c.split + c.send +
         c.recv;
}

// The phases of one rank's record as JSON (null: absent).
nlohmann::json phasesJson(const std::vector<double>& r) {
  static const char* kNames[kPhases] = {"listen", "host_local", "registered", "table_received", "first_link", "total"};
  nlohmann::json out = nlohmann::json::object();
  for (std::size_t i = 0; i < kPhases; ++i)
    out[kNames[i]] = r[8 + i] < 0 ? nlohmann::json() : nlohmann::json(std::round(r[8 + i] * 1000.0) / 1000.0);
  return out;
}

int runRank(int rank, const bench::Options& options, const tether::UniqueId& id) {
  tether::TcpOptions tcp;
  tcp.timeout = std::chrono::milliseconds(options.timeoutMs);
  // steady_clock is CLOCK_MONOTONIC, one clock for every process of the host,
  // so the ranks' stamps compare: the rendezvous once the last rank started is
  // the latest init end minus the latest start (bench_common.hpp, Result).
  const auto start = Clock::now();
  tether::TcpBootstrap b(rank, options.nranks, id, tcp);
  const auto end = Clock::now();
  const double initUs = std::chrono::duration<double, std::micro>(end - start).count();
  const double startStampUs = std::chrono::duration<double, std::micro>(start.time_since_epoch()).count();
  const double endStampUs = std::chrono::duration<double, std::micro>(end.time_since_epoch()).count();
  peakSockets = std::max(peakSockets, bench::openSockets());

  Mode mode = options.flags.count("poll") ? Mode::Poll : options.flags.count("ucc") ? Mode::Ucc : Mode::Blocking;
  if (options.flags.count("poll-rank0") && rank != 0) mode = Mode::Blocking;
  for (Op op : options.ops) {
    for (std::size_t bytes : bench::sizesFor(op, options.bytes)) {
      // An application pauses between init and its calls: the progress thread
      // holds the event loop when the first call comes (after 2 ms idle).
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      Cost cost;
      const tether::Counters before = b.counters();
      std::vector<double> times = timeOp(b, op, mode, bytes, options.warmup + options.iters, options.warmup, cost);
      const tether::Counters after = b.counters();
      // Record: [init, first call, peak sockets, peak RSS, start stamp, init end stamp,
      //          CPU of the timed calls, their tests, timed calls...]
      std::vector<double> record{initUs,
                                 times.front(),
                                 static_cast<double>(peakSockets),
                                 static_cast<double>(bench::peakRssKb()),
                                 startStampUs,
                                 endStampUs,
                                 cost.cpuUs,
                                 cost.tests};
      appendPhases(b.initTimings(), record);  // the first link may have come with this op
      for (std::uint64_t count : {allCalls(after) - allCalls(before), after.framesSent - before.framesSent,
                                  after.bytesSent - before.bytesSent, after.dials, after.redials, after.budgetCloses})
        record.push_back(static_cast<double>(count));
      record.insert(record.end(), times.end() - options.iters, times.end());
      const auto gatherStart = Clock::now();
      auto all = gatherToRoot(b, record);
      if (rank != 0) continue;
      const double gatherMs = std::chrono::duration<double, std::milli>(Clock::now() - gatherStart).count();

      bench::Result result;
      result.impl = "tether";
      result.op = op;
      result.nranks = options.nranks;
      result.bytes = bytes;
      result.iters = options.iters;
      std::vector<std::vector<double>> perRank;
      double lastStartUs = 0, lastEndUs = 0;
      std::vector<double> cpuPerCall;
      for (const auto& r : all) {
        result.initMs = std::max(result.initMs, r[0] / 1000.0);
        result.initMinMs = result.initMinMs < 0 ? r[0] / 1000.0 : std::min(result.initMinMs, r[0] / 1000.0);
        result.firstUs = std::max(result.firstUs, r[1]);
        result.maxFds = std::max(result.maxFds, static_cast<long>(r[2]));
        result.maxRssKb = std::max(result.maxRssKb, static_cast<long>(r[3]));
        lastStartUs = std::max(lastStartUs, r[4]);
        lastEndUs = std::max(lastEndUs, r[5]);
        cpuPerCall.push_back(r[6] / options.iters);
        perRank.emplace_back(r.begin() + kHead, r.end());
      }
      std::size_t slowest = 0;  // the rank whose constructor took longest
      for (std::size_t r = 0; r < all.size(); ++r)
        if (all[r][8 + kPhases - 1] > all[slowest][8 + kPhases - 1]) slowest = r;
      result.extra["init_phases_ms"] = {{"rank0", phasesJson(all[0])},
                                        {"slowest_rank", slowest},
                                        {"slowest", phasesJson(all[slowest])}};
      std::uint64_t counts[kCounts] = {};
      for (const auto& r : all)
        for (std::size_t k = 0; k < kCounts; ++k) counts[k] += static_cast<std::uint64_t>(r[8 + kPhases + k]);
      // Which rank held the peak sockets, and the peak of the others: rank 0
      // also takes every rank's record after each op (gatherToRoot), 1,023
      // incoming links at 1,024 ranks, which the budget then closes.
      std::size_t fdRank = 0;
      long othersFds = -1;
      for (std::size_t r = 0; r < all.size(); ++r)
        if (all[r][2] > all[fdRank][2]) fdRank = r;
      for (std::size_t r = 0; r < all.size(); ++r)
        if (r != fdRank) othersFds = std::max(othersFds, static_cast<long>(all[r][2]));
      result.extra["gather_ms"] =
          std::round(gatherMs * 1000.0) / 1000.0;  // rank 0's point-to-point fan-in of the records
      result.extra["max_fds_rank"] = fdRank;
      result.extra["max_fds_others"] = othersFds;
      result.extra["counters"] = {{"calls_rank0", static_cast<std::uint64_t>(all[0][8 + kPhases])}, {"frames_sent", counts[1]},
                                  {"bytes_sent", counts[2]},         {"dials", counts[3]},
                                  {"redials", counts[4]},            {"budget_closes", counts[5]},
                                  {"calls_timed", options.warmup + options.iters}};
      result.mode = options.flags.count("poll") ? "poll" : options.flags.count("ucc") ? "ucc" : "blocking";
      if (options.flags.count("poll-rank0") && result.mode != "blocking") result.mode += "-rank0";
      bench::summarizeCpu(cpuPerCall, result);
      result.testsPerCall = all[0][7] / options.iters;
      result.rendezvousMs = (lastEndUs - lastStartUs) / 1000.0;
      if (bench::isPingPong(op)) perRank.resize(1);  // rank 0 timed the round trips
      bench::summarize(perRank, result);
      bench::print(result, options.json);
    }
  }
  b.barrier();  // nobody tears down while a peer still reads
  return 0;
}

// Waits for all children until the deadline (sigtimedwait on SIGCHLD: no polling);
// kills the rest when it passes. Returns how many ranks failed.
int waitForRanks(std::map<pid_t, int>& children, const sigset_t& chld, Clock::time_point deadline) {
  int failed = 0;
  while (!children.empty()) {
    pid_t pid;
    int status = 0;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
      auto it = children.find(pid);
      if (it == children.end()) continue;
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        std::fprintf(stderr, "tether-bench: rank %d failed (%s %d)\n", it->second,
                     WIFEXITED(status) ? "exit" : "signal", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        ++failed;
      }
      children.erase(it);
    }
    if (children.empty()) break;
    const auto left = deadline - Clock::now();
    if (left <= Clock::duration::zero()) {
      for (const auto& child : children) {
        std::fprintf(stderr, "tether-bench: rank %d still running at the deadline, killed\n", child.second);
        kill(child.first, SIGKILL);
        waitpid(child.first, nullptr, 0);
        ++failed;
      }
      break;
    }
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    timespec wait{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
    sigtimedwait(&chld, nullptr, &wait);  // woken by SIGCHLD, a timeout or EINTR: re-check
  }
  return failed;
}

}  // namespace

int main(int argc, char** argv) {
  bench::Options options;
  try {
    options = bench::parseOptions(
        "tether-bench", argc, argv,
        {{"poll", "finish each call with a tight test() loop on its nonblocking form"},
         {"ucc", "UCC's pattern: the nonblocking form, ~1 us of work between tests, freed when done"},
         {"poll-rank0", "with --poll or --ucc: only rank 0 polls, the others block"},
         {"print-uid", "print the unique id on stderr (to ask the running job with tether-status --uid)"}});
    if (options.flags.count("poll") && options.flags.count("ucc"))
      throw std::invalid_argument("--poll and --ucc exclude each other");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tether-bench: %s\n", e.what());
    return 2;
  }
  tether::UniqueId id;
  try {
    id = tether::TcpBootstrap::createUniqueId("127.0.0.1:0");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tether-bench: createUniqueId: %s\n", e.what());
    return 1;
  }
  if (options.flags.count("print-uid")) std::fprintf(stderr, "tether-bench: uid %s\n", id.toString().c_str());

  sigset_t chld, previous;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, &previous);
  std::fflush(nullptr);
  // Long enough that a stuck call reports its own tether::Error before the kill.
  const auto deadline = Clock::now() + std::chrono::milliseconds(2 * options.timeoutMs + 10000);
  std::map<pid_t, int> children;
  for (int rank = 0; rank < options.nranks; ++rank) {
    pid_t pid = fork();
    if (pid < 0) {
      std::fprintf(stderr, "tether-bench: fork: %s\n", std::strerror(errno));
      for (const auto& child : children) kill(child.first, SIGKILL);
      waitForRanks(children, chld, Clock::now());
      return 1;
    }
    if (pid == 0) {
      sigprocmask(SIG_SETMASK, &previous, nullptr);
      int code = 1;
      try {
        code = runRank(rank, options, id);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "tether-bench rank %d: %s\n", rank, e.what());
      }
      std::cout.flush();
      std::fflush(nullptr);
      _exit(code);
    }
    children[pid] = rank;
  }
  return waitForRanks(children, chld, deadline) == 0 ? 0 : 1;
}
