#include "calibrate.hpp"

#include <fmt/format.h>

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

std::vector<CalibrationRow> model(const Params& params, const std::vector<Measurement>& measured, int calls) {
  // One world per rank count, running that count's operations in the
  // benchmark's order, as tether-bench does.
  std::map<int, std::vector<const Measurement*>> byN;
  const std::set<std::string> known{"allgather", "alltoall", "alltoallv", "broadcast", "barrier"};
  for (const auto& m : measured)
    if (known.count(m.op)) byN[m.nranks].push_back(&m);
  std::vector<CalibrationRow> rows;
  for (const auto& [n, ms] : byN) {
    Scenario s;
    s.params = params;
    s.params.hosts = 1;
    s.params.ranksPerHost = n;
    s.ops = {"init"};
    for (const Measurement* m : ms) s.ops.push_back(m->op);
    s.bytes = ms.front()->bytes == 0 ? 64 : ms.front()->bytes;
    s.calls = calls;
    s.anchors = false;
    const ScenarioResult r = runScenario(s);
    rows.push_back({n, "init", r.tether.front().algorithm, ms.front()->initMs * 1000, r.tether.front().firstUs});
    for (std::size_t i = 0; i < ms.size(); ++i)
      rows.push_back({n, ms[i]->op, r.tether[i + 1].algorithm, ms[i]->medianUs, r.tether[i + 1].medianUs});
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
  double Params::*knobs[] = {&Params::sendUs, &Params::recvUs, &Params::wakeUs, &Params::callUs};
  const char* names[] = {"send-us", "recv-us", "wake-us", "call-us"};
  Params best = start;
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
  log << fmt::format("fit: --send-us {:.2f} --recv-us {:.2f} --wake-us {:.2f} --call-us {:.2f} (misfit {:.4f})\n",
                     best.sendUs, best.recvUs, best.wakeUs, best.callUs, bestMisfit);
  return best;
}

void printCalibration(std::ostream& out, const std::vector<CalibrationRow>& rows) {
  out << fmt::format("{:>6} {:<10} {:<10} {:>12} {:>12} {:>9}\n", "N", "operation", "algorithm", "measured", "modeled",
                     "ratio");
  double logSum = 0, worst = 1;
  int count = 0;
  for (const auto& r : rows) {
    const double ratio = r.measuredUs > 0 ? r.modeledUs / r.measuredUs : 0;
    out << fmt::format("{:>6} {:<10} {:<10} {:>12} {:>12} {:>9.2f}\n", r.nranks, r.op, r.algorithm,
                       formatTime(r.measuredUs), formatTime(r.modeledUs), ratio);
    if (r.op == "init" || ratio <= 0) continue;
    logSum += std::log(ratio);
    ++count;
    if (std::abs(std::log(ratio)) > std::abs(std::log(worst))) worst = ratio;
  }
  if (count)
    out << fmt::format("modeled/measured over {} latency rows: geometric mean {:.2f}, worst {:.2f} (init: "
                       "tether-bench's includes forking the ranks; not fitted)\n",
                       count, std::exp(logSum / count), worst);
}

}  // namespace tether::sim
