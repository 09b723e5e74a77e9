// program.hpp — the random but rank-consistent operation program of the
// stress harness. Every rank derives the same program from (seed, communicator)
// alone, so all members of a communicator call the same operations in the same
// order with the same sizes, and every receiver can compute what each block it
// gets must contain.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "payload.hpp"

namespace tether::stress {

struct Op {
  OpKind kind = OpKind::Barrier;
  std::uint32_t index = 0;  // position in the communicator's program = collective id in payloads
  std::uint32_t bytes = 0;  // block size (allgather, alltoall, broadcast)
  int root = 0;             // broadcast
  std::vector<int> subset;  // barrier over these ranks only; empty = whole communicator
  // Point-to-point: every rank sends `messages` messages per thread to
  // (rank + shift) % n and receives as many from (rank - shift) % n; thread t
  // uses tag tagBase + t, so the same tags come back in later steps.
  int shift = 1;
  int tagBase = 0;
  int threads = 1;
  int messages = 1;
};

struct ProgramConfig {
  std::uint64_t seed = 1;
  std::uint32_t comm = 0;  // 0 = world, 1 + color = split children
  int size = 1;            // ranks in the communicator
  std::uint32_t length = 100;
  int p2pThreads = 3;
  // Bit (1 << OpKind) set = kind allowed; 0 = all kinds.
  std::uint32_t kinds = 0;
  // Largest block of allgather/alltoall/broadcast (the rare large ones are capped).
  std::uint32_t maxBlock = 64 * 1024;
};

// "allgather,alltoall,..." -> ProgramConfig::kinds; throws on an unknown name.
std::uint32_t parseKinds(const std::string& list);

std::vector<Op> makeProgram(const ProgramConfig& config);

// Alltoallv block size from `source` to `destination` in op `index` (0 allowed).
std::uint32_t alltoallvBytes(std::uint64_t seed, std::uint32_t comm, std::uint32_t index, int source, int destination);
// Size of message `message` sent by `source` from thread `thread` in a p2p op.
std::uint32_t p2pBytes(std::uint64_t seed, std::uint32_t comm, std::uint32_t index, int thread, int message,
                       int source);

}  // namespace tether::stress
