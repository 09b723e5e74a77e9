// executor.hpp — runs a stress program on one communicator of one rank and
// checks every block it receives.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "program.hpp"
#include "tether/bootstrap.hpp"

namespace tether::stress {

// Shared by every communicator and thread of one rank.
struct RankTally {
  std::atomic<std::uint64_t> ops{0};         // program operations completed
  std::atomic<std::uint64_t> blocks{0};      // blocks received and checked
  std::atomic<std::uint64_t> mismatches{0};  // blocks that were not what they should be
  std::atomic<std::uint64_t> bytes{0};       // payload bytes received
  std::mutex mutex;
  std::vector<std::string> firstMismatches;  // the first few, for the report

  void check(const void* block, std::size_t size, const OpKey& expected, const char* where);
};

// Runs `program` on `comm`, whose number in payloads is `commId`. Throws what
// tether throws (a Protocol error is a failure too); mismatches are counted.
void runProgram(Bootstrap& comm, std::uint32_t commId, std::uint64_t seed, const std::vector<Op>& program,
                RankTally& tally);

}  // namespace tether::stress
