// stress_run.hpp — forks the ranks of a stress run, each behind its own chaos
// proxy (optionally in its own network namespace), and gathers their tallies.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "chaos_proxy.hpp"

namespace tether::stress {

struct StressConfig {
  int nranks = 4;
  std::uint32_t ops = 200;  // program length of each communicator
  std::uint64_t seed = 1;
  int p2pThreads = 3;
  std::uint32_t kinds = 0;  // ProgramConfig::kinds
  std::uint32_t maxBlock = 64 * 1024;
  bool childToo = true;  // run a split child's program alongside the world's
  bool proxy = true;
  chaos::ChaosOptions chaos;  // seed is replaced per rank
  std::chrono::milliseconds callTimeout{60000};
  std::chrono::seconds deadline{120};  // the whole run; ranks still alive then are killed
  std::vector<std::string> netns;      // rank r joins netns[r % size]; empty: stay here
  std::string rootHost = "127.0.0.1";  // rank 0's address (inside netns[0] when namespaces are used)
};

struct RankReport {
  int rank = 0;
  bool ok = false;  // exited cleanly with a full report
  std::uint64_t ops = 0, blocks = 0, mismatches = 0, bytes = 0;
  std::vector<std::string> mismatchLines;
  std::string error;
};

struct StressResult {
  std::vector<RankReport> ranks;
  double seconds = 0;
  std::uint64_t ops() const;
  std::uint64_t blocks() const;
  std::uint64_t mismatches() const;
  bool allOk() const;
};

// The default adversity: every chaos behaviour on, mildly.
chaos::ChaosOptions defaultStressChaos();

StressResult runStress(const StressConfig& config);

}  // namespace tether::stress
