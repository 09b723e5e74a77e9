// The control: the naive per-message-connection transport, through the chaos
// proxy, must get caught swapping payloads — proof that the checker has teeth.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <exception>
#include <iostream>
#include <memory>
#include <thread>

#include "control_pattern.hpp"
#include "naive_transport.hpp"

using namespace tether;
using namespace tether::control;
using namespace std::chrono_literals;

namespace {}  // namespace

TEST_CASE("naive transport through the chaos proxy: swapped payloads are detected", "[control]") {
  const auto [nranks, rounds, seed] = controlSettings();

  std::vector<std::unique_ptr<NaiveRank>> ranks;
  std::vector<std::unique_ptr<chaos::ChaosProxy>> proxies;
  std::vector<std::string> advertised;
  for (int r = 0; r < nranks; ++r) {
    ranks.push_back(std::make_unique<NaiveRank>(r, nranks, 10s));
    proxies.push_back(std::make_unique<chaos::ChaosProxy>(controlChaos(seed, r)));
    proxies.back()->start("127.0.0.1:" + std::to_string(ranks.back()->listenPort()));
    advertised.push_back(proxies.back()->endpoint());
  }
  for (auto& rank : ranks) rank->setPeers(advertised);

  Detections found;
  std::vector<std::exception_ptr> errors(nranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        for (int round = 0; round < rounds; ++round) runRound(*ranks[r], round, found);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& p : proxies) p->stop();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }

  std::uint64_t reordered = 0;
  for (auto& p : proxies) reordered += p->stats().reorderedBatches;
  std::cout << "control (naive transport): " << nranks << " ranks, " << rounds << " rounds, seed " << seed << ": "
            << found.mismatches << " of " << found.checked << " blocks swapped; proxies reordered " << reordered
            << " accept batches\n";
  for (auto& example : found.examples) std::cout << "  e.g. " << example << '\n';
  int barrierRounds = 0;
  for (int dist = 1; dist < nranks; dist *= 2) ++barrierRounds;
  CHECK(found.checked == static_cast<std::uint64_t>(rounds) * nranks * (nranks + barrierRounds));
  CHECK(found.mismatches > 0);
}
