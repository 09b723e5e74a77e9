// The example's RDMA flow (examples/allgather-setup/rdma_flow.cpp) on ranks
// that are threads: fake mode reaches RTS everywhere and checks the RDMA-write
// all-gather; auto and none fall back to placeholder records on this host;
// real fails clearly without devices.
#include <catch2/catch.hpp>

#include <atomic>
#include <mutex>
#include <vector>

#include "rdma_flow.hpp"
#include "tether/error.hpp"
#include "tether/rdma/verbs.hpp"
#include "tether/testing/in_process.hpp"

using tether::Bootstrap;
using tether::testing::InProcessWorld;

namespace {
bool hostHasRdma() {
  std::vector<std::string> names;
  return tether::rdma::makeRealVerbs()->listDevices(names) == 0 && !names.empty();
}
}  // namespace

TEST_CASE("fake mode: N x (N-1) QPs at RTS and a checked RDMA-write all-gather", "[rdma][flow]") {
  constexpr int n = 4;
  InProcessWorld world(n);
  std::atomic<int> qps{0}, checked{0};
  std::mutex mutex;
  std::vector<std::string> notes;
  world.run([&](Bootstrap& boot) {
    const RdmaFlowResult r = runRdmaFlow(boot, "fake");
    qps += r.qpsAtRts;
    checked += r.rdmaWriteChecked ? 1 : 0;
    std::lock_guard<std::mutex> lock(mutex);
    notes.push_back(r.note);
    std::vector<std::string> phases;
    for (const auto& [name, ms] : r.phaseMs) {
      CHECK(ms >= 0.0);
      phases.push_back(name);
    }
    CHECK(phases == std::vector<std::string>{"device-check", "open-device", "qp-create", "qp-exchange", "qp-connect",
                                             "mr-exchange", "barrier", "rdma-write", "check"});
  });
  CHECK(qps.load() == n * (n - 1));
  CHECK(checked.load() == n);
  CHECK_THAT(notes.at(0), Catch::Contains("3 QPs at RTS") && Catch::Contains("checked byte for byte"));
}

TEST_CASE("none mode exchanges placeholder records only", "[rdma][flow]") {
  InProcessWorld world(3);
  std::atomic<int> qps{0};
  world.run([&](Bootstrap& boot) {
    const RdmaFlowResult r = runRdmaFlow(boot, "none");
    qps += r.qpsAtRts;
    CHECK_FALSE(r.rdmaWriteChecked);
    CHECK(r.note == "verbs=none: exchanged records without QPs");
  });
  CHECK(qps.load() == 0);
}

TEST_CASE("auto and real without devices", "[rdma][flow]") {
  if (hostHasRdma()) {
    WARN("this host has RDMA devices; the no-device behaviour is not testable here");
    return;
  }
  InProcessWorld world(2);
  world.run([&](Bootstrap& boot) {
    const RdmaFlowResult r = runRdmaFlow(boot, "auto");
    CHECK(r.qpsAtRts == 0);
    CHECK_THAT(r.note, Catch::StartsWith("no RDMA devices (") && Catch::EndsWith("exchanged records without QPs"));
  });
  InProcessWorld strict(2);
  try {
    strict.run([&](Bootstrap& boot) { runRdmaFlow(boot, "real"); });
    FAIL("--verbs=real succeeded without devices");
  } catch (const tether::Error& e) {
    CHECK(e.code() == tether::ErrorCode::System);
    CHECK_THAT(e.what(), Catch::Contains("--verbs=real but this rank has no RDMA devices"));
  }
}

TEST_CASE("an unknown mode is rejected", "[rdma][flow]") {
  InProcessWorld world(1);
  CHECK_THROWS_WITH(world.run([&](Bootstrap& boot) { runRdmaFlow(boot, "fast"); }),
                    Catch::Contains("--verbs=fast is not valid"));
}
