// The bring-up across forked ranks over TcpBootstrap, each process with its own
// fake device: the deployment shape (one process per rank) without hardware.
#include <catch2/catch.hpp>

#include <cstring>

#include "multiproc.hpp"
#include "rdma_flow.hpp"
#include "tampering_bootstrap.hpp"
#include "tether/rdma/fake_verbs.hpp"
#include "tether/rdma/mesh.hpp"
#include "tether/tcp_bootstrap.hpp"

using namespace tether;
using namespace tether::rdma;
using namespace std::chrono_literals;

namespace {
TcpOptions options() {
  TcpOptions o;
  o.timeout = 20s;
  return o;
}
}  // namespace

TEST_CASE("8 forked ranks each bring 7 RC QPs to RTS and all-gather MR records", "[rdma][forked]") {
  constexpr int n = 8;
  const auto results = test::runRanks(n, [](int rank, const UniqueId& id) {
    TcpBootstrap boot(rank, n, id, options());
    FakeVerbs verbs(FakeFabric::roce());
    Context context(verbs, Config{}, rank, n - 1);
    Mesh mesh = connectMesh(boot, context);
    test::expect(mesh.connected() == n - 1, "7 QPs at RTS, got " + std::to_string(mesh.connected()));
    for (int peer = 0; peer < n; ++peer) {
      if (peer == rank) continue;
      ibv_qp_attr attr{};
      ibv_qp_init_attr init{};
      verbs.queryQp(mesh.qps[peer]->handle(), &attr, IBV_QP_STATE, &init);
      test::expect(attr.qp_state == IBV_QPS_RTS, "state RTS");
      // The QP for `peer` points at a QP of another process (not one of ours).
      test::expect(!FakeVerbs::hasLocalQp(attr.dest_qp_num), "remote QPN belongs to another process");
    }
    std::vector<unsigned char> buffer(4096);
    MemoryRegion mr(context, buffer.data(), buffer.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    const auto records = exchangeMemoryRegions(boot, mr, buffer.size());
    for (int r = 0; r < n; ++r) test::expect(records[r].rank == static_cast<uint32_t>(r), "MR record rank");
    boot.barrier();
  });
  INFO(test::summary(results));
  CHECK(test::allOk(results));
}

TEST_CASE("the example flow in fake mode on 8 forked ranks: 8 x 7 QPs at RTS", "[rdma][forked]") {
  constexpr int n = 8;
  const auto results = test::runRanks(n, [](int rank, const UniqueId& id) {
    TcpBootstrap boot(rank, n, id, options());
    const RdmaFlowResult r = runRdmaFlow(boot, "fake");
    test::expect(r.qpsAtRts == n - 1, "QPs at RTS: " + std::to_string(r.qpsAtRts));
    test::expect(!r.rdmaWriteChecked, "no fake writes between processes");
    test::expect(r.note.find("RDMA writes skipped") != std::string::npos, "note: " + r.note);
  });
  INFO(test::summary(results));
  CHECK(test::allOk(results));
}

TEST_CASE("a record corrupted in transit fails on its receiver, naming peer and field", "[rdma][forked]") {
  constexpr int n = 6;
  const auto results = test::runRanks(n, [](int rank, const UniqueId& id) {
    TcpBootstrap boot(rank, n, id, options());
    FakeVerbs verbs(FakeFabric::roce());
    Context context(verbs, Config{}, rank, n - 1);
    // Rank 2 receives peer 5's record with its QPN zeroed (bytes 16..19).
    test::TamperingBootstrap tampered(boot, [rank](unsigned char* recv, std::size_t bytes) {
      if (rank == 2) std::memset(recv + 5 * bytes + 16, 0, 4);
    });
    try {
      connectMesh(tampered, context);
    } catch (const Error&) {
      test::expect(verbs.modifyQpCalls() == 0, "no ibv_modify_qp before the rejection");
      throw;
    }
  });
  INFO(test::summary(results));
  for (const auto& r : results) {
    if (r.rank == 2) {
      CHECK(r.exitCode == 1);
      CHECK_THAT(r.output, Catch::Contains("tether::Error[Protocol]: rank 2: rdma qp-exchange: QP record from "
                                           "peer 5 has qpn = 0x0 (want 1..0xffffff)"));
    } else {
      CHECK(r.exitCode == 0);
    }
  }
}
