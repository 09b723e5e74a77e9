// plugin_ranks.hpp — what one forked rank does with the NVSHMEM plug-in.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

namespace tether::test {

// Pipes on which rank 0 hands the unique id to the others (NVSHMEM leaves
// that to the application: MPI_Bcast, a file, ...). Made before forking.
struct UidPipes {
  explicit UidPipes(int nranks);
  ~UidPipes();
  void send(const unsigned char* uid) const;                                         // rank 0
  void receive(int rank, unsigned char* uid, std::chrono::milliseconds wait) const;  // others
  std::vector<int> readEnds, writeEnds;
};

// Per-rank tallies, in memory shared with the parent (MAP_SHARED, made before forking).
struct RankTally {
  std::uint64_t iterations = 0;
  std::uint64_t records = 0;
  std::uint64_t swapped = 0;
  std::uint64_t proxyAccepted = 0;
  std::uint64_t proxyPieces = 0;
  std::uint64_t proxyReordered = 0;
};
RankTally* sharedTallies(int nranks);
void freeTallies(RankTally* tallies, int nranks);

struct StressConfig {
  int nranks = 8;
  std::uint64_t iterations = 1000;
  std::uint64_t seed = 1;
  bool proxy = true;
};

// Loads the plug-in, joins through it (rank 0 makes the unique id), checks the
// handle's fields and one not-in-place all-gather, then runs `iterations` of
// alltoall(64-byte records) + barrier with every record checked. Throws on any
// failure; the tally lands in tallies[rank].
void stressRank(int rank, const StressConfig& config, const UidPipes& pipes, RankTally* tallies);

// `victim` calls global_exit(status) while the others wait in a barrier; they
// must fail naming the victim and the status. The victim's process exits.
void globalExitRank(int rank, int nranks, int victim, int status, const UidPipes& pipes);

}  // namespace tether::test
