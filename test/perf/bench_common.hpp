// Shared by tether-bench and mpi-bench so both take the same options and print
// the same lines: one JSON object per (op, bytes) with latency statistics.
//
// Latency model: each rank times each iteration on its own (no barrier between
// iterations); an iteration's latency is the slowest rank's time for it; the
// report gives the median, p99 and max of those per-iteration maxima. For
// sendrecv (ping-pong between ranks 0 and 1) it is half of rank 0's round trip,
// as the OSU latency benchmark reports; for pingpong (the same exchange) it is
// rank 0's whole round trip, the figure issue 17's latency goal compares with
// tcp-floor's blocking-socket ping-pong.
#pragma once

#include "proc_stats.hpp"

#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <iostream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <cxxopts.hpp>
#include <nlohmann/json.hpp>

namespace bench {

enum class Op { Allgather, Alltoall, Barrier, Broadcast, Sendrecv, Pingpong };

inline Op parseOp(const std::string& name) {
  if (name == "allgather") return Op::Allgather;
  if (name == "alltoall") return Op::Alltoall;
  if (name == "barrier") return Op::Barrier;
  if (name == "broadcast") return Op::Broadcast;
  if (name == "sendrecv") return Op::Sendrecv;
  if (name == "pingpong") return Op::Pingpong;
  throw std::invalid_argument("unknown --op '" + name + "' (allgather|alltoall|barrier|broadcast|sendrecv|pingpong)");
}

// Both are a ping-pong between ranks 0 and 1, timed by rank 0 alone.
inline bool isPingPong(Op op) { return op == Op::Sendrecv || op == Op::Pingpong; }

inline const char* opName(Op op) {
  switch (op) {
    case Op::Allgather:
      return "allgather";
    case Op::Alltoall:
      return "alltoall";
    case Op::Barrier:
      return "barrier";
    case Op::Broadcast:
      return "broadcast";
    case Op::Sendrecv:
      return "sendrecv";
    case Op::Pingpong:
      return "pingpong";
  }
  return "?";
}

struct Options {
  int nranks = 2;  // mpi-bench: taken from MPI_COMM_WORLD, --nranks only checked
  bool nranksGiven = false;
  std::vector<Op> ops;
  std::vector<std::size_t> bytes;
  int iters = 1000;
  int warmup = 50;
  bool json = false;
  long long timeoutMs = 60000;  // each blocking call; tether-bench's whole run: 2x + 10 s
  std::set<std::string> flags;  // the program's own flags that were given (parseOptions' `extra`)
};

// A flag only one program takes (e.g. tcp-floor's --full-mesh).
struct Flag {
  const char* name;
  const char* help;
};

// Throws std::invalid_argument with a message for the user; prints help and exits on --help.
inline Options parseOptions(const char* program, int argc, char** argv, const std::vector<Flag>& extra = {}) {
  cxxopts::Options spec(program, "Bootstrap latency benchmark: init time and per-op latency");
  spec.add_options()("nranks", "number of ranks", cxxopts::value<int>())(
      "op", "allgather|alltoall|barrier|broadcast|sendrecv|pingpong (comma list)",
      cxxopts::value<std::vector<std::string>>()->default_value("allgather"))(
      "bytes", "bytes per rank (allgather/alltoall) or message size (comma list)",
      cxxopts::value<std::vector<std::size_t>>()->default_value("64"))("iters", "timed iterations",
                                                                       cxxopts::value<int>()->default_value("1000"))(
      "warmup", "untimed iterations first (the first one opens connections)",
      cxxopts::value<int>()->default_value("50"))(
      "timeout-ms", "deadline of each call (tether-bench: the whole run gets twice that + 10 s)",
      cxxopts::value<long long>()->default_value("60000"))("json", "one JSON object per line")("h,help", "this help");
  for (const Flag& flag : extra) spec.add_options()(flag.name, flag.help);
  cxxopts::ParseResult args;
  try {
    args = spec.parse(argc, argv);
  } catch (const cxxopts::exceptions::exception& e) {
    throw std::invalid_argument(e.what());
  }
  if (args.count("help")) {
    std::cout << spec.help() << std::endl;
    std::exit(0);
  }
  Options options;
  if (args.count("nranks")) {
    options.nranks = args["nranks"].as<int>();
    options.nranksGiven = true;
  }
  for (const auto& name : args["op"].as<std::vector<std::string>>()) options.ops.push_back(parseOp(name));
  options.bytes = args["bytes"].as<std::vector<std::size_t>>();
  options.iters = args["iters"].as<int>();
  options.warmup = args["warmup"].as<int>();
  options.timeoutMs = args["timeout-ms"].as<long long>();
  options.json = args.count("json") != 0;
  for (const Flag& flag : extra)
    if (args.count(flag.name)) options.flags.insert(flag.name);
  if (options.nranks < 1 || options.nranks > 1024) throw std::invalid_argument("--nranks must be 1..1024");
  if (options.iters < 1) throw std::invalid_argument("--iters must be positive");
  if (options.warmup < 0) throw std::invalid_argument("--warmup must not be negative");
  if (options.timeoutMs < 1) throw std::invalid_argument("--timeout-ms must be positive");
  for (Op op : options.ops) {
    if (isPingPong(op) && options.nranks < 2)
      throw std::invalid_argument(std::string(opName(op)) + " needs --nranks >= 2");
  }
  return options;
}

// Sizes to run for an op: a barrier moves no payload, so it runs once with 0.
inline std::vector<std::size_t> sizesFor(Op op, const std::vector<std::size_t>& bytes) {
  return op == Op::Barrier ? std::vector<std::size_t>{0} : bytes;
}

// Open sockets of this process now (-1: /proc unreadable).
inline long openSockets() { return tether::test::openSockets(); }

inline long peakRssKb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;  // kilobytes on Linux
}

struct Result {
  std::string impl;  // "tether", "mpi"
  Op op = Op::Barrier;
  int nranks = 0;
  std::size_t bytes = 0;
  int iters = 0;
  double initMs = 0;
  // The fastest rank's init: the last rank forked waits least, so this is
  // close to the rendezvous once every rank is up (initMs includes launching).
  double initMinMs = -1;
  // The rendezvous once every rank had started: the slowest rank's init end
  // minus the latest start stamp (one clock for all ranks), so launching the
  // ranks one by one is left out; -1 when not measured. initMinMs <= it <= initMs.
  double rendezvousMs = -1;
  double firstUs = 0;  // slowest rank's first (warm-up) iteration: includes connection setup
  double medianUs = 0, p99Us = 0, maxUs = 0;
  double meanUs = 0;  // their mean: the time per call of a long run (slow outliers included)
  // Peak open sockets of one rank (max over ranks, sampled after every call)
  // and peak RSS (getrusage ru_maxrss, max over ranks); -1 when not measured.
  long maxFds = -1, maxRssKb = -1;
  // tether-bench: how calls were finished (blocking, poll, ucc, poll-rank0,
  // ucc-rank0; empty: not reported), CPU time (all threads) per timed call,
  // the mean of all ranks and rank 0's, and rank 0's test() calls per call.
  // tcp-floor reports the CPU too (mode blocking or epoll). cpuUsMedianRank:
  // the median rank's CPU per call, a leaf's (the star's and the tree's
  // centres are a few ranks, and weigh on the mean).
  std::string mode;
  double cpuUs = 0, cpuUsRank0 = 0, cpuUsMedianRank = 0, testsPerCall = 0;
  // More keys for the JSON line (tether-bench: init phases and counters).
  nlohmann::json extra = nlohmann::json::object();
};

// This process's CPU time (user + system, all threads) so far, in microseconds.
inline double cpuMicroseconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e6 +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// `cpuPerCall[r]`: rank r's CPU per timed call. Fills the CPU fields.
inline void summarizeCpu(std::vector<double> cpuPerCall, Result& result) {
  result.cpuUsRank0 = cpuPerCall.front();
  double sum = 0;
  for (double c : cpuPerCall) sum += c;
  result.cpuUs = sum / static_cast<double>(cpuPerCall.size());
  std::sort(cpuPerCall.begin(), cpuPerCall.end());
  result.cpuUsMedianRank = cpuPerCall[cpuPerCall.size() / 2];
}

// `perRank[r][i]`: rank r's time for iteration i (microseconds). Fills the latency fields.
inline void summarize(const std::vector<std::vector<double>>& perRank, Result& result) {
  std::vector<double> slowest(perRank.front().size(), 0.0);
  for (const auto& times : perRank) {
    for (std::size_t i = 0; i < slowest.size(); ++i) slowest[i] = std::max(slowest[i], times.at(i));
  }
  std::sort(slowest.begin(), slowest.end());
  auto rankAt = [&](double q) {  // nearest-rank percentile
    std::size_t index = static_cast<std::size_t>(std::ceil(q * static_cast<double>(slowest.size())));
    return slowest[std::min(slowest.size(), std::max<std::size_t>(index, 1)) - 1];
  };
  result.medianUs = rankAt(0.5);
  double sum = 0;
  for (double t : slowest) sum += t;
  result.meanUs = sum / static_cast<double>(slowest.size());
  result.p99Us = rankAt(0.99);
  result.maxUs = slowest.back();
}

inline void print(const Result& r, bool json) {
  auto round3 = [](double v) { return std::round(v * 1000.0) / 1000.0; };
  if (json) {
    nlohmann::json line = {{"impl", r.impl},
                           {"op", opName(r.op)},
                           {"nranks", r.nranks},
                           {"bytes", r.bytes},
                           {"iters", r.iters},
                           {"init_ms", round3(r.initMs)},
                           {"first_us", round3(r.firstUs)},
                           {"median_us", round3(r.medianUs)},
                           {"p99_us", round3(r.p99Us)},
                           {"max_us", round3(r.maxUs)},
                           {"mean_us", round3(r.meanUs)}};
    if (r.initMinMs >= 0) line["init_min_ms"] = round3(r.initMinMs);
    if (r.rendezvousMs >= 0) line["rendezvous_ms"] = round3(r.rendezvousMs);
    if (r.maxFds >= 0) line["max_fds"] = r.maxFds;
    if (r.maxRssKb >= 0) line["max_rss_kb"] = r.maxRssKb;
    if (!r.mode.empty()) {
      line["mode"] = r.mode;
      line["cpu_us"] = round3(r.cpuUs);
      line["cpu_us_rank0"] = round3(r.cpuUsRank0);
      line["cpu_us_median_rank"] = round3(r.cpuUsMedianRank);
      line["tests_per_call"] = round3(r.testsPerCall);
    }
    line.update(r.extra);
    std::cout << line.dump() << std::endl;
    return;
  }
  std::printf(
      "%-7s %-10s nranks=%-4d bytes=%-8zu iters=%-6d init=%9.3f ms  first=%10.1f us  "
      "median=%9.2f us  p99=%9.2f us  max=%9.2f us  mean=%9.2f us\n",
      r.impl.c_str(), opName(r.op), r.nranks, r.bytes, r.iters, r.initMs, r.firstUs, r.medianUs, r.p99Us, r.maxUs,
      r.meanUs);
  if (r.rendezvousMs >= 0)
    std::printf("        init_min=%.3f ms rendezvous after the last start=%.3f ms\n", r.initMinMs, r.rendezvousMs);
  if (r.maxFds >= 0) std::printf("        max_fds=%ld max_rss_kb=%ld\n", r.maxFds, r.maxRssKb);
  if (!r.mode.empty())
    std::printf(
        "        mode=%s cpu per call: %.2f us a rank, %.2f us rank 0, %.2f us the median rank; tests per call (rank "
        "0)=%.1f\n",
        r.mode.c_str(), r.cpuUs, r.cpuUsRank0, r.cpuUsMedianRank, r.testsPerCall);
  std::fflush(stdout);
}

}  // namespace bench
