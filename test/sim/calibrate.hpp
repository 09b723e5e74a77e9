// Calibration: the one-host model (H = 1, R = N ranks on this machine's C
// cores) beside real tether-bench runs. Measurements come from tether-bench
// --json lines (a file, or tether-sim runs the benchmark itself); the model
// runs the same operations in the same order in one world, each as
// back-to-back calls, and reports tether-bench's statistic (the median over
// the timed calls of the slowest rank's time). fit() searches the CPU
// parameters that make the model track the measurements.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "model.hpp"

namespace tether::sim {

struct Measurement {
  int nranks = 0;
  std::string op;  // allgather, alltoall, barrier, broadcast
  std::size_t bytes = 0;
  double medianUs = 0;
  double initMs = 0;
  double initMinMs = -1;     // the fastest rank's init (newer tether-bench), -1 if absent
  double rendezvousMs = -1;  // the rendezvous after the last rank started (newer still), -1 if absent
  // The table row it ran when forced (TETHER_ALGO; JSON "algorithm"), "" for tether's own choice.
  std::string algorithm;
};

// tether-bench --json lines; other lines are skipped.
std::vector<Measurement> readBenchJson(std::istream& in);
// Runs `bench --nranks N --op allgather,alltoall,barrier --bytes B --iters I --json`.
std::vector<Measurement> runBench(const std::string& bench, int nranks, std::size_t bytes, int iters);

struct CalibrationRow {
  int nranks = 0;
  std::string op, algorithm;
  double measuredUs = 0, modeledUs = 0;  // measured: the median over the sittings
  int runs = 1;
  double low = 0, high = 0;  // the sittings' range
  double initMinUs = -1;     // init: the median of the fastest ranks' init, where measured
  double rendezvousUs = -1;  // init: the median of the rendezvous after the last start, where measured
};

// Models every measured operation (and init, beside tether-bench's
// init_ms), with `calls` back-to-back calls per operation (the first opens
// the links). Several sittings of one (N, operation) count by their median.
std::vector<CalibrationRow> model(const Params& params, const std::vector<Measurement>& measured, int calls);
// Coordinate search over sendUs, recvUs, wakeUs and callUs minimizing the
// squared log ratio of modeled to measured latency (init left out).
Params fit(Params start, const std::vector<Measurement>& measured, int calls, std::ostream& log);
// The table, then the geometric mean of modeled/measured and the farthest ratio.
void printCalibration(std::ostream& out, const std::vector<CalibrationRow>& rows);

}  // namespace tether::sim
