#include "calibrate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <istream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "report.hpp"
#include "scenario.hpp"

namespace tether::sim {

std::vector<Measurement> readBenchJson(std::istream& in) {
  std::vector<Measurement> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] != '{') continue;
    const auto j = nlohmann::json::parse(line);
    Measurement m;
    m.nranks = j.at("nranks").get<int>();
    m.op = j.at("op").get<std::string>();
    m.bytes = j.at("bytes").get<std::size_t>();
    m.medianUs = j.at("median_us").get<double>();
    m.initMs = j.value("init_ms", 0.0);
    m.initMinMs = j.value("init_min_ms", -1.0);
    m.rendezvousMs = j.value("rendezvous_ms", -1.0);
    m.algorithm = j.value("algorithm", std::string());
    out.push_back(m);
  }
  return out;
}

std::vector<Measurement> runBench(const std::string& bench, int nranks, std::size_t bytes, int iters) {
  const std::string cmd = fmt::format("'{}' --nranks {} --op allgather,alltoall,barrier --bytes {} --iters {} --json",
                                      bench, nranks, bytes, iters);
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  if (!pipe) throw std::runtime_error("cannot run " + cmd);
  std::string text;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, pipe.get())) text += buf;
  const int status = pclose(pipe.release());
  if (status != 0) throw std::runtime_error(fmt::format("{} failed (status {})", cmd, status));
  std::istringstream in(text);
  return readBenchJson(in);
}

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

}  // namespace

std::vector<CalibrationRow> model(const Params& params, const std::vector<Measurement>& measured, int calls) {
  // Per rank count: its operations in the benchmark's order, each with the
  // figures of every sitting that measured it.
  struct Series {
    std::vector<std::string> ops;
    std::map<std::string, std::vector<double>> latency;
    std::vector<double> init, initMin, rendezvous;
    std::size_t bytes = 64;
  };
  // Forced rows run in a world of their own (rank count, row).
  std::map<std::pair<int, std::string>, Series> byN;
  const std::set<std::string> known{"allgather", "alltoall", "alltoallv", "broadcast", "barrier"};
  for (const auto& m : measured) {
    if (!known.count(m.op)) continue;
    Series& s = byN[{m.nranks, m.algorithm}];
    auto& values = s.latency[m.op];
    if (values.empty()) s.ops.push_back(m.op);
    if (values.size() == s.init.size()) {  // once per sitting
      s.init.push_back(m.initMs * 1000);
      if (m.initMinMs >= 0) s.initMin.push_back(m.initMinMs * 1000);
      if (m.rendezvousMs >= 0) s.rendezvous.push_back(m.rendezvousMs * 1000);
    }
    values.push_back(m.medianUs);
    if (m.bytes) s.bytes = m.bytes;
  }
  std::vector<CalibrationRow> rows;
  for (const auto& [key, series] : byN) {
    const auto& [n, forced] = key;
    // One world per rank count, the operations in order, as tether-bench runs them.
    Scenario s;
    s.params = params;
    s.params.hosts = 1;
    s.params.ranksPerHost = n;
    s.ops = {"init"};
    // The rendezvous the fitted set was fitted with (docs/scale.md): what links
    // init leaves open changes the first calls.
    s.rendezvous = "no-host-local";
    s.ops.insert(s.ops.end(), series.ops.begin(), series.ops.end());
    s.bytes = series.bytes;
    s.calls = calls;
    s.anchors = false;
    if (!forced.empty())
      for (const auto& op : series.ops) s.forced[op] = forced;
    const ScenarioResult r = runScenario(s);
    auto row = [&](const std::string& op, const OpResult& modeled, const std::vector<double>& values, double us) {
      CalibrationRow c{n, op, modeled.algorithm, median(values), us};
      c.runs = static_cast<int>(values.size());
      c.low = *std::min_element(values.begin(), values.end());
      c.high = *std::max_element(values.begin(), values.end());
      rows.push_back(c);
    };
    if (forced.empty()) {  // init once per rank count
      row("init", r.tether.front(), series.init, r.tether.front().firstUs);
      if (!series.initMin.empty()) rows.back().initMinUs = median(series.initMin);
      if (!series.rendezvous.empty()) rows.back().rendezvousUs = median(series.rendezvous);
    }
    for (std::size_t i = 0; i < series.ops.size(); ++i)
      row(series.ops[i], r.tether[i + 1], series.latency.at(series.ops[i]), r.tether[i + 1].medianUs);
  }
  return rows;
}

namespace {

double misfit(const std::vector<CalibrationRow>& rows) {
  double sum = 0;
  for (const auto& r : rows) {
    if (r.op == "init" || r.measuredUs <= 0 || r.modeledUs <= 0) continue;
    const double e = std::log(r.modeledUs / r.measuredUs);
    sum += e * e;
  }
  return sum;
}

}  // namespace

Params fit(Params start, const std::vector<Measurement>& measured, int calls, std::ostream& log) {
  double Params::*knobs[] = {&Params::sendUs, &Params::recvUs,  &Params::wakeUs,  &Params::switchUs,
                             &Params::callUs, &Params::cpuGBps, &Params::crowdUs, &Params::crowdRanks};
  const char* names[] = {"send-us", "recv-us",  "wake-us",  "switch-us",
                         "call-us", "cpu-gbps", "crowd-us", "crowd-ranks"};
  Params best = start;
  for (auto knob : knobs) best.*knob = std::max(1.0, best.*knob);  // a step multiplies: start above zero
  double bestMisfit = misfit(model(best, measured, calls));
  log << fmt::format("fit: start misfit {:.4f}\n", bestMisfit);
  for (double step : {2.0, 1.4, 1.15, 1.05}) {
    for (bool improved = true; improved;) {
      improved = false;
      for (std::size_t k = 0; k < std::size(knobs); ++k) {
        for (double f : {step, 1 / step}) {
          Params trial = best;
          trial.*knobs[k] = std::max(0.05, trial.*knobs[k] * f);
          const double m = misfit(model(trial, measured, calls));
          if (m < bestMisfit - 1e-9) {
            best = trial;
            bestMisfit = m;
            improved = true;
            log << fmt::format("fit: {} = {:.2f} us, misfit {:.4f}\n", names[k], best.*knobs[k], m);
          }
        }
      }
    }
  }
  log << fmt::format(
      "fit: --send-us {:.2f} --recv-us {:.2f} --wake-us {:.2f} --switch-us {:.2f} --call-us {:.2f} --cpu-gbps {:.3f} "
      "--crowd-us {:.2f} --crowd-ranks {:.1f} (misfit {:.4f})\n",
      best.sendUs, best.recvUs, best.wakeUs, best.switchUs, best.callUs, best.cpuGBps, best.crowdUs, best.crowdRanks,
      bestMisfit);
  return best;
}

void printCalibration(std::ostream& out, const std::vector<CalibrationRow>& rows) {
  out << fmt::format("{:>6} {:<10} {:<14} {:>5} {:>12} {:>23} {:>12} {:>7}\n", "N", "operation", "algorithm", "runs",
                     "measured", "range", "modeled", "ratio");
  double logSum = 0, worst = 1;
  int count = 0;
  for (const auto& r : rows) {
    if (r.op == "init") continue;
    const double ratio = r.measuredUs > 0 ? r.modeledUs / r.measuredUs : 0;
    out << fmt::format("{:>6} {:<10} {:<14} {:>5} {:>12} {:>23} {:>12} {:>7.2f}\n", r.nranks, r.op, r.algorithm, r.runs,
                       formatTime(r.measuredUs), formatTime(r.low) + " .. " + formatTime(r.high),
                       formatTime(r.modeledUs), ratio);
    if (ratio <= 0) continue;
    logSum += std::log(ratio);
    ++count;
    if (std::abs(std::log(ratio)) > std::abs(std::log(worst))) worst = ratio;
  }
  if (count)
    out << fmt::format("modeled/measured over {} rows: geometric mean {:.2f}, farthest {:.2f}\n", count,
                       std::exp(logSum / count), worst);
  out << "init, not fitted: tether-bench's init_ms is the slowest rank's constructor, which includes the other\n"
         "ranks being forked one after another and the process start; the model starts every rank at once.\n"
         "init_min_ms (the fastest rank's) and rendezvous_ms (the latest init end minus the latest start:\n"
         "the rendezvous once every rank had started) are the closer figures\n";
  for (const auto& r : rows)
    if (r.op == "init")
      out << fmt::format(
          "{:>6} init measured {} (median of {}){}, modeled {} ({})\n", r.nranks, formatTime(r.measuredUs), r.runs,
          (r.initMinUs >= 0 ? "; fastest rank " + formatTime(r.initMinUs) : std::string()) +
              (r.rendezvousUs >= 0 ? "; after the last start " + formatTime(r.rendezvousUs) : std::string()),
          formatTime(r.modeledUs), r.algorithm);
}

}  // namespace tether::sim
