// tether-stress — N forked ranks run a long random, rank-consistent program of
// collectives and multi-threaded tagged point-to-point on the world and a split
// child at once, every peer link through a chaos proxy; every received block is
// checked. Exit 0 only when every rank finished every operation and no block
// was swapped, truncated, duplicated or corrupted.
//
//   tether-stress --nranks 4 --ops 200          # short (CI)
//   TETHER_STRESS_OPS=4000 tether-stress --nranks 16 --deadline-s 1800
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include <cxxopts.hpp>

#include "program.hpp"
#include "stress_run.hpp"

using namespace tether::stress;

namespace {
std::vector<std::string> splitComma(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}
}  // namespace

int main(int argc, char** argv) {
  cxxopts::Options cli("tether-stress", "Ordering stress test for tether through a chaos proxy");
  const char* envOps = std::getenv("TETHER_STRESS_OPS");
  cli.add_options()("nranks", "ranks (processes)", cxxopts::value<int>()->default_value("4"))(
      "ops", "program length per communicator (default: TETHER_STRESS_OPS, else 200)",
      cxxopts::value<std::uint32_t>()->default_value(envOps ? envOps : "200"))(
      "seed", "program seed (same on every rank)", cxxopts::value<std::uint64_t>()->default_value("1"))(
      "chaos-seed", "chaos proxy seed", cxxopts::value<std::uint64_t>()->default_value("1"))(
      "threads", "threads per point-to-point step", cxxopts::value<int>()->default_value("3"))(
      "kinds", "only these operation kinds (comma list: allgather,alltoall,alltoallv,barrier,broadcast,sendrecv)",
      cxxopts::value<std::string>()->default_value(""))("max-block", "cap on allgather/alltoall/broadcast block bytes",
                                                        cxxopts::value<std::uint32_t>()->default_value("65536"))(
      "world-only", "run no split child program alongside the world's")(
      "no-proxy", "connect ranks directly, without chaos proxies")(
      "chaos", "proxy behaviours: comma list of shuffle,hold,fragment,delay,stall, or all / none",
      cxxopts::value<std::string>()->default_value("all"))(
      "netns", "comma-separated network namespaces; rank r joins the (r mod k)-th", cxxopts::value<std::string>())(
      "root-host", "rank 0's address", cxxopts::value<std::string>()->default_value("127.0.0.1"))(
      "timeout-ms", "deadline of each tether call", cxxopts::value<int>()->default_value("60000"))(
      "deadline-s", "deadline of the whole run", cxxopts::value<int>()->default_value("120"))("h,help",
                                                                                              "show this help");
  try {
    auto args = cli.parse(argc, argv);
    if (args.count("help")) {
      std::cout << cli.help() << '\n';
      return 0;
    }
    StressConfig config;
    config.nranks = args["nranks"].as<int>();
    config.ops = args["ops"].as<std::uint32_t>();
    config.seed = args["seed"].as<std::uint64_t>();
    config.p2pThreads = args["threads"].as<int>();
    config.proxy = args.count("no-proxy") == 0;
    config.kinds = parseKinds(args["kinds"].as<std::string>());
    config.childToo = args.count("world-only") == 0;
    config.maxBlock = args["max-block"].as<std::uint32_t>();
    config.chaos = defaultStressChaos();
    config.chaos.seed = args["chaos-seed"].as<std::uint64_t>();
    auto wanted = args["chaos"].as<std::string>();
    if (wanted != "all") {
      auto on = splitComma(wanted);
      auto has = [&](const char* name) { return std::find(on.begin(), on.end(), name) != on.end(); };
      if (!has("shuffle")) config.chaos.shuffleAccepts = false;
      if (!has("hold")) config.chaos.holdNewConnMs = {};
      if (!has("fragment")) config.chaos.fragmentBytes = {};
      if (!has("delay")) config.chaos.delayPiecesUs = {};
      if (!has("stall")) config.chaos.stallProbability = 0;
    }
    if (args.count("netns")) config.netns = splitComma(args["netns"].as<std::string>());
    config.rootHost = args["root-host"].as<std::string>();
    config.callTimeout = std::chrono::milliseconds(args["timeout-ms"].as<int>());
    config.deadline = std::chrono::seconds(args["deadline-s"].as<int>());

    std::cout << "tether-stress: " << config.nranks << " ranks, " << config.ops
              << " ops per communicator (world + split child at once), seed " << config.seed << ", "
              << (config.proxy ? "through chaos proxies" : "direct")
              << (config.netns.empty() ? "" : ", " + std::to_string(config.netns.size()) + " network namespaces")
              << std::endl;
    auto result = runStress(config);

    const std::uint64_t expectedPerRank = (config.childToo ? 2ull : 1ull) * config.ops;
    bool pass = result.allOk() && result.mismatches() == 0;
    for (const auto& r : result.ranks) {
      if (r.ok && r.ops != expectedPerRank) {
        pass = false;
        std::cout << "rank " << r.rank << ": completed " << r.ops << " of " << expectedPerRank << " ops\n";
      }
      if (!r.error.empty()) std::cout << "rank " << r.rank << ": " << r.error << '\n';
      for (const auto& line : r.mismatchLines) std::cout << "rank " << r.rank << ": MISMATCH " << line << '\n';
    }
    std::printf("ranks %d, operations %llu (%llu per rank), blocks checked %llu, mismatches %llu, time %.2f s: %s\n",
                config.nranks, static_cast<unsigned long long>(result.ops()),
                static_cast<unsigned long long>(expectedPerRank), static_cast<unsigned long long>(result.blocks()),
                static_cast<unsigned long long>(result.mismatches()), result.seconds, pass ? "PASS" : "FAIL");
    return pass ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "tether-stress: " << e.what() << '\n';
    return 2;
  }
}
