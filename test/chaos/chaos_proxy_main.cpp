// chaos-proxy — the chaos proxy as a command-line tool, for poking at any TCP
// service by hand:  chaos-proxy --target 127.0.0.1:5000 --shuffle --fragment 1:8
#include <csignal>
#include <cstdio>
#include <iostream>
#include <pthread.h>
#include <string>

#include <cxxopts.hpp>

#include "chaos_proxy.hpp"

using tether::chaos::ChaosOptions;
using tether::chaos::ChaosProxy;
using tether::chaos::Range;

namespace {
// "a:b" or "a" -> Range{a, b}.
Range parseRange(const std::string& text) {
  auto colon = text.find(':');
  Range r;
  r.min = static_cast<std::uint32_t>(std::stoul(text.substr(0, colon)));
  r.max = colon == std::string::npos ? r.min : static_cast<std::uint32_t>(std::stoul(text.substr(colon + 1)));
  if (r.max < r.min) throw std::invalid_argument("range '" + text + "' has max < min");
  return r;
}
}  // namespace

int main(int argc, char** argv) {
  cxxopts::Options cli("chaos-proxy", "Seeded TCP proxy that reorders accepts and cuts, delays and stalls streams");
  cli.add_options()("target", "host:port to forward to", cxxopts::value<std::string>())(
      "listen", "host:port to listen on (port 0: any)", cxxopts::value<std::string>()->default_value("127.0.0.1:0"))(
      "seed", "random seed", cxxopts::value<std::uint64_t>()->default_value("1"))(
      "shuffle", "hand connections to the target in shuffled order")(
      "shuffle-window-ms", "pool time before a shuffled batch leaves",
      cxxopts::value<std::uint32_t>()->default_value("10"))("shuffle-batch", "connections per shuffled batch",
                                                            cxxopts::value<std::uint32_t>()->default_value("16"))(
      "hold-ms", "hold new connections MIN:MAX ms", cxxopts::value<std::string>())(
      "fragment", "forward in pieces of MIN:MAX bytes", cxxopts::value<std::string>())(
      "delay-us", "delay each piece MIN:MAX microseconds", cxxopts::value<std::string>())(
      "stall-prob", "probability of a stall before a piece", cxxopts::value<double>()->default_value("0"))(
      "stall-ms", "stall length MIN:MAX ms", cxxopts::value<std::string>()->default_value("0"))("h,help",
                                                                                                "show this help");
  try {
    auto args = cli.parse(argc, argv);
    if (args.count("help") || !args.count("target")) {
      std::cout << cli.help() << '\n';
      return args.count("help") ? 0 : 2;
    }
    ChaosOptions options;
    options.seed = args["seed"].as<std::uint64_t>();
    options.shuffleAccepts = args.count("shuffle") > 0;
    options.shuffleWindowMs = args["shuffle-window-ms"].as<std::uint32_t>();
    options.shuffleBatch = args["shuffle-batch"].as<std::uint32_t>();
    if (args.count("hold-ms")) options.holdNewConnMs = parseRange(args["hold-ms"].as<std::string>());
    if (args.count("fragment")) options.fragmentBytes = parseRange(args["fragment"].as<std::string>());
    if (args.count("delay-us")) options.delayPiecesUs = parseRange(args["delay-us"].as<std::string>());
    options.stallProbability = args["stall-prob"].as<double>();
    options.stallMs = parseRange(args["stall-ms"].as<std::string>());

    // Block the stop signals before the proxy thread starts so only sigwait sees them.
    sigset_t stopSignals;
    sigemptyset(&stopSignals);
    sigaddset(&stopSignals, SIGINT);
    sigaddset(&stopSignals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stopSignals, nullptr);

    ChaosProxy proxy(options);
    proxy.start(args["target"].as<std::string>(), args["listen"].as<std::string>());
    std::cout << "chaos-proxy listening on " << proxy.endpoint() << std::endl;
    int signal = 0;
    sigwait(&stopSignals, &signal);
    proxy.stop();
    auto s = proxy.stats();
    std::cout << "accepted " << s.accepted << ", upstream " << s.connectedUpstream << ", failed " << s.failedUpstream
              << ", batches " << s.batches << " (" << s.reorderedBatches << " reordered), pieces " << s.pieces
              << ", bytes " << s.bytes << ", stalls " << s.stalls << '\n';
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "chaos-proxy: " << e.what() << '\n';
    return 2;
  }
}
