// One operation's figures, as tether-sim prints them (text or JSON lines).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace tether::sim {

struct OpResult {
  std::string op;              // init, allgather, alltoall, ...
  std::string algorithm;       // the table row (collectives) or rendezvous name
  std::string who = "tether";  // or "anchor"
  std::string mode = "full";   // full or periodic (engine.hpp)
  std::uint64_t bytes = 0;     // per rank (collectives)
  std::uint32_t rounds = 0;    // longest causal chain of messages
  std::uint64_t messages = 0;
  std::uint64_t busiestBytes = 0;                 // payload sent by the busiest rank
  std::uint64_t copiedBytes = 0;                  // local copies (Copy, CopyBlocks) of the rank that copies most
  std::uint64_t connections = 0;                  // links opened by this operation
  std::uint32_t peakLinks = 0;                    // most links a rank other than 0 holds after it (links persist)
  std::uint64_t rootMessages = 0, rootBytes = 0;  // sent or received by rank 0
  std::uint32_t rootLinks = 0;
  std::vector<double> callUs;  // per call (back to back): the slowest rank's time for it
  double firstUs = 0;          // the first call (opens the links)
  double medianUs = 0;         // median over the later calls (tether-bench's figure); the first if only one
  double wallS = 0;            // the simulator's own time for it
  std::uint64_t events = 0;
};

// The nearest-rank median of the calls after the first (tether-bench's
// statistic over its timed iterations), or the first call's time.
void summarizeCalls(OpResult& r);

void printHeader(std::ostream& out);
void printRow(std::ostream& out, const OpResult& r);
void printJson(std::ostream& out, const OpResult& r);

// "12.3 us", "4.56 ms", "7.89 s".
std::string formatTime(double us);
// "512 B", "1.5 KiB", "2.8 MiB", "3.1 GiB".
std::string formatBytes(double bytes);

}  // namespace tether::sim
