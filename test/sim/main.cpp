// tether-sim: tether's real rendezvous and collective plans over a simulated
// network of H hosts x R ranks (C cores and one NIC per host), in one
// process, for up to 131,072 ranks; the anchors' algorithms beside them.
// docs/scale.md explains the model, its parameters and its limits.
//
//   tether-sim --hosts 12288 --ranks-per-host 8 --latency-us 10 --nic-gbps 10
//   tether-sim --calibrate 16,32,64,128 --measured bench.json [--fit]
#include <sys/resource.h>

#include <chrono>
#include <cxxopts.hpp>
#include <fstream>
#include <iostream>
#include <thread>

#include <fmt/format.h>

#include "calibrate.hpp"
#include "scenario.hpp"

namespace {

using namespace tether::sim;

void addModelOptions(cxxopts::Options& spec, const Params& d) {
  auto dbl = [](double v) { return cxxopts::value<double>()->default_value(fmt::format("{}", v)); };
  spec.add_options("model")("hosts", "hosts H", cxxopts::value<int>()->default_value(std::to_string(d.hosts)))(
      "ranks-per-host", "ranks per host R (N = H*R)",
      cxxopts::value<int>()->default_value(std::to_string(d.ranksPerHost)))(
      "cores", "cores per host C", cxxopts::value<int>()->default_value(std::to_string(d.cores)))(
      "latency-us", "one-way latency per message between hosts", dbl(d.latencyUs))(
      "local-latency-us", "one-way latency per message within a host (loopback)", dbl(d.localLatencyUs))(
      "nic-gbps", "NIC bandwidth per host and direction, GB/s", dbl(d.nicGBps))(
      "send-us", "CPU per message at the sender", dbl(d.sendUs))("recv-us", "CPU per message at the receiver",
                                                                 dbl(d.recvUs))(
      "cpu-gbps", "CPU copy rate per byte sent, received or copied, GB/s", dbl(d.cpuGBps))(
      "wake-us", "CPU each time a rank gets a core (a wake-up)", dbl(d.wakeUs))(
      "switch-us", "more CPU when it takes the core from another rank (process switch)", dbl(d.switchUs))(
      "call-us", "CPU per collective call per rank", dbl(d.callUs))(
      "crowd-us", "more CPU per wake-up on a host crowded past --crowd-ranks per core, times 1 - crowd-ranks/(R/C)",
      dbl(d.crowdUs))("crowd-ranks", "ranks per core whose working sets the caches hold", dbl(d.crowdRanks))(
      "quantum-us", "time slice of a rank when others wait for a core", dbl(d.quantumUs))(
      "connect-rtts", "round trips before a new link is up at the dialler", dbl(d.connectRtts))(
      "connect-us", "CPU per new link at each end (accept/dial, handshake)", dbl(d.connectUs))(
      "max-links", "the collectives' soft link budget per rank (TETHER_MAX_LINKS; 0: none)",
      cxxopts::value<int>()->default_value(std::to_string(d.maxLinks)))(
      "tree-radix", "the tree rows' radix (TETHER_ALGO=tree_radix; 0: tether's own, fitted to N)",
      cxxopts::value<int>()->default_value(std::to_string(d.treeRadix)))(
      "eager-bytes", "sends up to this size are not waited for",
      cxxopts::value<std::size_t>()->default_value(std::to_string(d.eagerBytes)))(
      "start-spread-us", "ranks start the rendezvous at random times in [0, this]", dbl(d.startSpreadUs))(
      "seed", "random seed (start spread, all-to-all-v sizes)",
      cxxopts::value<std::uint64_t>()->default_value(std::to_string(d.seed)))(
      "table-tree",
      "host-local (auto, host-local): the table down a tree of leaders, as the code; =false: a star from the root "
      "(the code before the leader tree)",
      cxxopts::value<bool>()->default_value("true")->implicit_value("true"))(
      "host-tree-radix", "--table-tree: radix of the tree of host leaders that carries the table",
      cxxopts::value<int>()->default_value(std::to_string(d.hostTreeRadix)));
}

Params readModel(const cxxopts::ParseResult& a) {
  Params p;
  p.hosts = a["hosts"].as<int>();
  p.ranksPerHost = a["ranks-per-host"].as<int>();
  p.cores = a["cores"].as<int>();
  p.latencyUs = a["latency-us"].as<double>();
  p.localLatencyUs = a["local-latency-us"].as<double>();
  p.nicGBps = a["nic-gbps"].as<double>();
  p.sendUs = a["send-us"].as<double>();
  p.recvUs = a["recv-us"].as<double>();
  p.cpuGBps = a["cpu-gbps"].as<double>();
  p.wakeUs = a["wake-us"].as<double>();
  p.switchUs = a["switch-us"].as<double>();
  p.callUs = a["call-us"].as<double>();
  p.crowdUs = a["crowd-us"].as<double>();
  p.crowdRanks = a["crowd-ranks"].as<double>();
  p.quantumUs = a["quantum-us"].as<double>();
  p.connectRtts = a["connect-rtts"].as<double>();
  p.connectUs = a["connect-us"].as<double>();
  p.maxLinks = a["max-links"].as<int>();
  p.treeRadix = a["tree-radix"].as<int>();
  if (p.treeRadix == 1 || p.treeRadix < 0) throw std::invalid_argument("--tree-radix must be 0 or at least 2");
  p.eagerBytes = a["eager-bytes"].as<std::size_t>();
  p.startSpreadUs = a["start-spread-us"].as<double>();
  p.seed = a["seed"].as<std::uint64_t>();
  p.tableTree = a["table-tree"].as<bool>();
  p.hostTreeRadix = a["host-tree-radix"].as<int>();
  if (p.hostTreeRadix < 2) throw std::invalid_argument("--host-tree-radix must be at least 2");
  if (p.hosts < 1 || p.ranksPerHost < 1 || p.cores < 1)
    throw std::invalid_argument("--hosts, --ranks-per-host and --cores must be at least 1");
  if (static_cast<long long>(p.hosts) * p.ranksPerHost > (1 << 20))
    throw std::invalid_argument("at most 1,048,576 ranks");
  return p;
}

Mode parseMode(const std::string& m) {
  if (m == "auto") return Mode::Auto;
  if (m == "full") return Mode::Full;
  if (m == "periodic") return Mode::Periodic;
  throw std::invalid_argument("--mode must be auto, full or periodic");
}

double peakRssMiB() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

int calibrate(const cxxopts::ParseResult& a, Params p) {
  if (!a.count("cores")) p.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<Measurement> measured;
  if (a.count("measured")) {
    for (const auto& file : a["measured"].as<std::vector<std::string>>()) {
      std::ifstream in(file);
      if (!in) throw std::invalid_argument("cannot read " + file);
      for (auto& m : readBenchJson(in)) measured.push_back(m);
    }
  } else {
    for (int n : a["calibrate"].as<std::vector<int>>()) {
      std::cerr << "tether-sim: running tether-bench with " << n << " ranks\n";
      for (auto& m :
           runBench(a["bench"].as<std::string>(), n, a["bytes"].as<std::size_t>(), a["bench-iters"].as<int>()))
        measured.push_back(m);
    }
  }
  if (a.count("calibrate")) {  // only the listed rank counts
    const auto keep = a["calibrate"].as<std::vector<int>>();
    std::erase_if(measured,
                  [&](const Measurement& m) { return std::find(keep.begin(), keep.end(), m.nranks) == keep.end(); });
  }
  if (measured.empty()) throw std::invalid_argument("no measurements to calibrate against");
  const int calls = a["sim-calls"].as<int>();
  if (a.count("fit")) p = fit(p, measured, calls, std::cout);
  std::cout << "calibration, one host: " << describe(p) << "\n";
  printCalibration(std::cout, model(p, measured, calls));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  cxxopts::Options spec("tether-sim", "tether's rendezvous and collectives over a simulated network (docs/scale.md)");
  addModelOptions(spec, Params{});
  spec.add_options("run")(
      "ops", "init|allgather|alltoall|alltoallv|broadcast|barrier (comma list, in order)",
      cxxopts::value<std::vector<std::string>>()->default_value("init,allgather,alltoall,alltoallv,broadcast,barrier"))(
      "bytes", "bytes per rank (allgather, alltoall; alltoallv: mean block; broadcast: all)",
      cxxopts::value<std::size_t>()->default_value("64"))(
      "calls", "back-to-back calls per operation (the first opens links; median of the rest is shown)",
      cxxopts::value<int>()->default_value("1"))("root", "broadcast root", cxxopts::value<int>()->default_value("0"))(
      "rendezvous",
      "tether's rendezvous: root|tree|auto|no-host-local|host-local|star (default: TETHER_RENDEZVOUS, else auto: as World, "
      "host-local aggregation with the table down the leaders' tree unless TETHER_HOST_LOCAL=0)",
      cxxopts::value<std::string>()->default_value(defaultRendezvous()))(
      "algo", "force a table row, OP=ROW (e.g. allgather=ring); repeatable",
      cxxopts::value<std::vector<std::string>>())("no-anchors",
                                                  "leave out the anchors (star rendezvous, ring all-gather)")(
      "mode", "auto|full|periodic (periodic: one host stands for all, for shift-symmetric plans)",
      cxxopts::value<std::string>()->default_value("auto"))(
      "budget", "auto: above this many plan steps + blocks copied + messages, run periodic when possible",
      cxxopts::value<double>()->default_value("4e8"))("json", "one JSON object per operation")("h,help", "this help");
  spec.add_options("calibration")("calibrate", "calibrate the one-host model at these rank counts (comma list)",
                                  cxxopts::value<std::vector<int>>())(
      "measured", "tether-bench --json output to calibrate against (else tether-sim runs --bench)",
      cxxopts::value<std::vector<std::string>>())(
      "bench", "tether-bench to run", cxxopts::value<std::string>()->default_value("build/test/perf/tether-bench"))(
      "bench-iters", "tether-bench --iters", cxxopts::value<int>()->default_value("200"))(
      "sim-calls", "modeled back-to-back calls per operation", cxxopts::value<int>()->default_value("12"))(
      "fit", "fit send-us, recv-us, wake-us and call-us to the measurements first");
  try {
    const auto a = spec.parse(argc, argv);
    if (a.count("help")) {
      std::cout << spec.help({"model", "run", "calibration"}) << std::endl;
      return 0;
    }
    Params p = readModel(a);
    if (a.count("calibrate") || a.count("measured")) return calibrate(a, p);

    Scenario s;
    s.params = p;
    s.ops = a["ops"].as<std::vector<std::string>>();
    for (const auto& op : s.ops)
      if (op != "init") parseOp(op);
    s.bytes = a["bytes"].as<std::size_t>();
    s.calls = a["calls"].as<int>();
    s.root = a["root"].as<int>();
    s.rendezvous = a["rendezvous"].as<std::string>();
    findRendezvous(s.rendezvous);
    s.anchors = !a.count("no-anchors");
    s.mode = parseMode(a["mode"].as<std::string>());
    s.budget = a["budget"].as<double>();
    if (a.count("algo"))
      for (const auto& f : a["algo"].as<std::vector<std::string>>()) {
        const auto eq = f.find('=');
        if (eq == std::string::npos) throw std::invalid_argument("--algo wants OP=ROW, got '" + f + "'");
        s.forced[f.substr(0, eq)] = f.substr(eq + 1);
      }
    if (s.root < 0 || s.root >= p.nranks()) throw std::invalid_argument("--root must be a rank");
    if (s.calls < 1) throw std::invalid_argument("--calls must be at least 1");

    const bool json = a.count("json") != 0;
    const auto began = std::chrono::steady_clock::now();
    if (!json) {
      std::cout << fmt::format("tether-sim: N = {} ({} hosts x {} ranks, {} cores), {} B\n", p.nranks(), p.hosts,
                               p.ranksPerHost, p.cores, s.bytes)
                << "model: " << describe(p) << "\n";
      printHeader(std::cout);
    }
    const ScenarioResult r = runScenario(s, [&](const OpResult& row) {
      json ? printJson(std::cout, row) : printRow(std::cout, row);
      std::cout.flush();
    });
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    if (json) {
      std::cout << fmt::format(
          "{{\"who\":\"total\",\"tether_us\":{},\"anchor_us\":{},\"sim_wall_s\":{:.3f},\"peak_rss_mib\":{:.1f}}}\n",
          r.tetherTotalUs, r.anchorTotalUs, wall, peakRssMiB());
      return 0;
    }
    std::cout << fmt::format("total, first calls: tether init + allgather + alltoall {}", formatTime(r.tetherTotalUs));
    if (s.anchors) std::cout << fmt::format("; anchors star init + ring allgather {}", formatTime(r.anchorTotalUs));
    std::cout << fmt::format("\nsimulator: {:.1f} s, peak RSS {:.0f} MiB\n", wall, peakRssMiB());
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "tether-sim: " << e.what() << "\n";
    return 1;
  }
}
