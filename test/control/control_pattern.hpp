// control_pattern.hpp — the alltoall-then-barrier pattern of the broken
// bootstraps, run identically over the naive transport and over tether, every
// block checked with the self-describing payload checker.
#pragma once

#include <atomic>
#include <cstdlib>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "chaos_proxy.hpp"
#include "payload.hpp"

namespace tether::control {

inline constexpr std::size_t kBlockBytes = 64;

// Ranks, rounds and seed of a control run; both halves (naive and tether) read
// the same variables so that they run the same pattern.
struct ControlSettings {
  int nranks;
  int rounds;
  std::uint64_t seed;
};

inline ControlSettings controlSettings() {
  auto envInt = [](const char* name, int fallback) {
    const char* v = std::getenv(name);
    return v ? std::atoi(v) : fallback;
  };
  return {envInt("TETHER_CONTROL_RANKS", 4), envInt("TETHER_CONTROL_ROUNDS", 40),
          static_cast<std::uint64_t>(envInt("TETHER_CONTROL_SEED", 1))};
}

// The adversity both transports face: accepts handed over in shuffled
// batches, new connections held back for a random time, streams cut and delayed.
inline chaos::ChaosOptions controlChaos(std::uint64_t seed, int rank) {
  chaos::ChaosOptions o;
  o.seed = seed * 1000 + static_cast<std::uint64_t>(rank);
  o.shuffleAccepts = true;
  o.shuffleBatch = 8;
  o.shuffleWindowMs = 2;
  o.holdNewConnMs = {0, 30};
  o.fragmentBytes = {1, 48};
  o.delayPiecesUs = {0, 50};
  return o;
}

struct Detections {
  std::atomic<std::uint64_t> checked{0};
  std::atomic<std::uint64_t> mismatches{0};
  std::mutex mutex;
  std::vector<std::string> examples;  // the first few, for the log

  void check(const void* block, const stress::OpKey& expected) {
    checked++;
    if (auto problem = stress::checkPayload(block, kBlockBytes, expected)) {
      mismatches++;
      std::lock_guard<std::mutex> lock(mutex);
      if (examples.size() < 5) examples.push_back(*problem);
    }
  }
};

// Keys of round `round`: the alltoall is collective 2*round, the barrier 2*round+1.
inline stress::OpKey alltoallKey(int round, int source, int destination) {
  return {0, static_cast<std::uint32_t>(2 * round), stress::OpKind::Alltoall, 0, source, destination, 0};
}
inline stress::OpKey barrierKey(int round, int k, int source, int destination) {
  return {0,
          static_cast<std::uint32_t>(2 * round + 1),
          stress::OpKind::Barrier,
          static_cast<std::uint32_t>(k),
          source,
          destination,
          0};
}

// One round on one rank. `Transport` provides alltoall(send, recv, bytes) and
// barrier(tokenBytes, fill(k, peer, out), seen(k, peer, in)).
template <class Transport>
void runRound(Transport& t, int round, Detections& found) {
  const int n = t.size();
  const int r = t.rank();
  std::vector<unsigned char> out(n * kBlockBytes), in(n * kBlockBytes);
  for (int j = 0; j < n; ++j) stress::fillPayload(out.data() + j * kBlockBytes, kBlockBytes, alltoallKey(round, r, j));
  t.alltoall(out.data(), in.data(), kBlockBytes);
  for (int j = 0; j < n; ++j) found.check(in.data() + j * kBlockBytes, alltoallKey(round, j, r));
  t.barrier(
      kBlockBytes,
      [&](int k, int to, unsigned char* token) {
        stress::fillPayload(token, kBlockBytes, barrierKey(round, k, r, to));
      },
      [&](int k, int from, const unsigned char* token) { found.check(token, barrierKey(round, k, from, r)); });
}

}  // namespace tether::control
