// The other half of the control: the same alltoall-then-barrier pattern, with
// the same tag reuse, through the same chaos proxies — over tether. The
// checker that catches the naive transport must find nothing here.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <exception>
#include <iostream>
#include <memory>
#include <thread>

#include "control_pattern.hpp"
#include "tether/tcp_bootstrap.hpp"

using namespace tether;
using namespace tether::control;
using namespace std::chrono_literals;

namespace {

// Gives tether the naive transport's shape: alltoall, then a barrier whose
// tokens travel as tagged messages with tags restarting at 0 every call.
struct TetherTransport {
  Bootstrap& b;
  int rank() const { return b.rank(); }
  int size() const { return b.size(); }
  void alltoall(const void* sendData, void* recvData, std::size_t bytes) { b.alltoall(sendData, recvData, bytes); }
  template <class Fill, class Seen>
  void barrier(std::size_t tokenBytes, Fill tokenFor, Seen received) {
    b.barrier();
    std::vector<unsigned char> out(tokenBytes), in(tokenBytes);
    for (int k = 0, dist = 1; dist < size(); ++k, dist *= 2) {
      int to = (rank() + dist) % size();
      int from = (rank() - dist + size()) % size();
      tokenFor(k, to, out.data());
      b.send(out.data(), out.size(), to, k);
      b.recv(in.data(), in.size(), from, k);
      received(k, from, in.data());
    }
  }
};

}  // namespace

TEST_CASE("tether through the same chaos proxy: no swapped payloads", "[control]") {
  const auto [nranks, rounds, seed] = controlSettings();

  UniqueId id = TcpBootstrap::createUniqueId("127.0.0.1:0");
  std::vector<std::unique_ptr<chaos::ChaosProxy>> proxies;
  for (int r = 0; r < nranks; ++r) proxies.push_back(std::make_unique<chaos::ChaosProxy>(controlChaos(seed, r)));

  Detections found;
  std::vector<std::exception_ptr> errors(nranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        TcpOptions options;
        options.timeout = 20s;
        options.advertiseFor = [&proxies, r](const std::string& listen) {
          proxies[r]->start(listen);
          return proxies[r]->endpoint();
        };
        TcpBootstrap world(r, nranks, id, options);
        TetherTransport t{world};
        for (int round = 0; round < rounds; ++round) runRound(t, round, found);
        world.barrier();
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  std::uint64_t reordered = 0, pieces = 0;
  for (auto& p : proxies) {
    p->stop();
    reordered += p->stats().reorderedBatches;
    pieces += p->stats().pieces;
  }
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }

  std::cout << "control (tether): " << nranks << " ranks, " << rounds << " rounds, seed " << seed << ": "
            << found.mismatches << " of " << found.checked << " blocks swapped; proxies reordered " << reordered
            << " accept batches, forwarded " << pieces << " pieces\n";
  for (auto& example : found.examples) std::cout << "  e.g. " << example << '\n';
  int barrierRounds = 0;
  for (int dist = 1; dist < nranks; dist *= 2) ++barrierRounds;
  CHECK(found.checked == static_cast<std::uint64_t>(rounds) * nranks * (nranks + barrierRounds));
  CHECK(found.mismatches == 0);
  CHECK(pieces > 0);  // the traffic really went through the proxies
}
