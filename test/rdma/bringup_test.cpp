// Bring-up on the fake backend within one process: two "ranks", each with its
// own FakeVerbs, Context and QP, connected through their records.
#include <catch2/catch.hpp>

#include <cstring>
#include <numeric>
#include <vector>

#include "tether/error.hpp"
#include "tether/rdma/context.hpp"
#include "tether/rdma/fake_verbs.hpp"

using namespace tether::rdma;
using tether::Error;
using tether::ErrorCode;
using namespace std::chrono_literals;

namespace {

struct Rank {
  FakeVerbs verbs;
  Context context;
  QueuePair qp;
  Rank(FakeFabric fabric, int rank, int peer, Config config = {})
      : verbs(std::move(fabric)), context(verbs, config, rank, 1), qp(context, peer) {}
};

ibv_qp_attr queried(Rank& r) {
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  REQUIRE(r.verbs.queryQp(r.qp.handle(), &attr, IBV_QP_STATE, &init) == 0);
  return attr;
}

// The Error a call throws (fails the test if it throws none).
template <typename F>
Error errorOf(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  FAIL("no tether::Error thrown");
  throw;  // unreachable
}

}  // namespace

TEST_CASE("a context opens the first active port and chooses the GID", "[rdma][bringup]") {
  FakeVerbs roce(FakeFabric::roce());
  Context c(roce, Config{}, 0, 4);
  CHECK(c.deviceName() == "fake_roce0");
  CHECK(c.portNumber() == 1);
  CHECK(c.gid().index == 3);
  CHECK(c.needsGrh());
  CHECK(c.where() == "fake_roce0:1 (fake)");

  FakeVerbs ib(FakeFabric::infiniband());
  Context i(ib, Config{}, 0, 4);
  CHECK_FALSE(i.needsGrh());
  CHECK(i.portAttr().lid != 0);

  FakeFabric grh = FakeFabric::infiniband();
  grh.devices[0].ports[0].grhRequired = true;
  FakeVerbs grhVerbs(grh);
  CHECK(Context(grhVerbs, Config{}, 0, 1).needsGrh());
}

TEST_CASE("the first device with an active port is chosen; TETHER_IB_HCA picks one", "[rdma][bringup]") {
  FakeFabric fabric = FakeFabric::infiniband();
  FakeDevice down = fabric.devices[0];
  down.name = "fake_down0";
  down.ports[0].state = IBV_PORT_DOWN;
  fabric.devices.insert(fabric.devices.begin(), down);
  FakeDevice second = fabric.devices[1];
  second.name = "fake_ib1";
  second.ports.push_back(second.ports[0]);
  fabric.devices.push_back(second);
  FakeVerbs verbs(fabric);
  CHECK(Context(verbs, Config{}, 0, 1).deviceName() == "fake_ib0");
  Config pick;
  parseHca("fake_ib1:2", pick);
  Context picked(verbs, pick, 0, 1);
  CHECK(picked.deviceName() == "fake_ib1");
  CHECK(picked.portNumber() == 2);
  Config downPort;
  parseHca("fake_down0:1", downPort);
  const Error e = errorOf([&] { Context(verbs, downPort, 3, 1); });
  CHECK(e.code() == ErrorCode::System);
  CHECK_THAT(e.what(), Catch::Contains("rank 3") && Catch::Contains("fake_down0:1 is DOWN"));
}

TEST_CASE("a missing device is a clear error", "[rdma][bringup]") {
  FakeVerbs none(FakeFabric::noDevices());
  const Error e = errorOf([&] { Context(none, Config{}, 2, 1); });
  CHECK(e.code() == ErrorCode::System);
  CHECK(e.rank() == 2);
  CHECK_THAT(e.what(), Catch::Contains("rank 2: rdma: no RDMA devices") && Catch::Contains("errno 38"));

  FakeVerbs roce(FakeFabric::roce());
  Config wrong;
  parseHca("mlx5_9", wrong);
  const Error w = errorOf([&] { Context(roce, wrong, 0, 1); });
  CHECK(w.code() == ErrorCode::InvalidArgument);
  CHECK_THAT(w.what(), Catch::Contains("\"mlx5_9\"") && Catch::Contains("present: fake_roce0"));

  FakeFabric empty;
  FakeVerbs emptyVerbs(empty);
  CHECK_THROWS_WITH(Context(emptyVerbs, Config{}, 0, 1), Catch::Contains("found none"));
}

TEST_CASE("two ranks connect RESET->INIT->RTR->RTS and RDMA-write each other", "[rdma][bringup]") {
  for (const bool roce : {true, false}) {
    INFO((roce ? "RoCE" : "InfiniBand"));
    const FakeFabric fabric = roce ? FakeFabric::roce() : FakeFabric::infiniband();
    Rank a(fabric, 0, 1), b(fabric, 1, 0);
    const QpRecord ra = decodeQpRecord(encode(a.qp.localRecord()).data());
    const QpRecord rb = decodeQpRecord(encode(b.qp.localRecord()).data());
    a.qp.connect(rb);
    b.qp.connect(ra);
    CHECK(a.qp.state() == IBV_QPS_RTS);
    CHECK(a.verbs.qpState(a.qp.handle()) == IBV_QPS_RTS);
    CHECK(b.verbs.qpState(b.qp.handle()) == IBV_QPS_RTS);
    const ibv_qp_attr attr = queried(a);
    CHECK(attr.dest_qp_num == b.qp.qpn());
    CHECK(attr.rq_psn == rb.psn);
    CHECK(attr.sq_psn == ra.psn);
    CHECK(attr.ah_attr.is_global == (roce ? 1 : 0));
    if (roce) {
      CHECK(attr.ah_attr.grh.sgid_index == 3);
      CHECK(std::memcmp(attr.ah_attr.grh.dgid.raw, rb.gid.data(), 16) == 0);
    } else {
      CHECK(attr.ah_attr.dlid == rb.lid);
    }
    CHECK(attr.timeout == 20);
    CHECK(attr.retry_cnt == 7);

    std::vector<unsigned char> src(256), dst(256, 0);
    std::iota(src.begin(), src.end(), 0);
    MemoryRegion srcMr(a.context, src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
    MemoryRegion dstMr(b.context, dst.data(), dst.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    const MrRecord remote = decodeMrRecord(encode(dstMr.record()).data());
    a.qp.postWrite(src.data() + 16, 100, srcMr.lkey(), remote.addr + 50, remote.rkey);
    a.context.waitCompletions(1, 2s);
    CHECK(std::equal(src.begin() + 16, src.begin() + 116, dst.begin() + 50));
    CHECK(dst[49] == 0);
    CHECK(dst[150] == 0);
  }
}

TEST_CASE("the path MTU is negotiated down to the smaller port", "[rdma][bringup]") {
  FakeFabric big = FakeFabric::infiniband();
  FakeFabric small = FakeFabric::infiniband();
  small.devices[0].ports[0].activeMtu = IBV_MTU_1024;
  Rank a(big, 0, 1), b(small, 1, 0);
  a.qp.connect(b.qp.localRecord());
  b.qp.connect(a.qp.localRecord());
  CHECK(queried(a).path_mtu == IBV_MTU_1024);
  CHECK(queried(b).path_mtu == IBV_MTU_1024);
}

TEST_CASE("bad records are rejected before any ibv_modify_qp", "[rdma][bringup]") {
  struct Case {
    const char* what;
    bool roce;
    void (*corrupt)(QpRecord&);
    const char* field;
  };
  const Case cases[] = {
      {"zeroed", true, [](QpRecord& r) { r = decodeQpRecord(std::vector<unsigned char>(64).data()); }, "magic"},
      {"QPN 0", true, [](QpRecord& r) { r.qpn = 0; }, "qpn = 0x0"},
      {"GID 0", true, [](QpRecord& r) { r.gid = {}; }, "gid = ::"},
      {"LID 0", false, [](QpRecord& r) { r.lid = 0; }, "lid = 0"},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    const FakeFabric fabric = c.roce ? FakeFabric::roce() : FakeFabric::infiniband();
    Rank a(fabric, 4, 6), b(fabric, 6, 4);
    QpRecord bad = b.qp.localRecord();
    c.corrupt(bad);
    const Error e = errorOf([&] { a.qp.connect(bad); });
    CHECK(e.code() == ErrorCode::Protocol);
    CHECK(e.peer() == 6);
    CHECK_THAT(e.what(), Catch::Contains("rank 4") && Catch::Contains("peer 6") && Catch::Contains(c.field));
    CHECK(a.verbs.modifyQpCalls() == 0);
    CHECK(a.verbs.qpState(a.qp.handle()) == IBV_QPS_RESET);
  }
}

TEST_CASE("a verbs refusal names the verb, transition, peer, errno and mask", "[rdma][bringup]") {
  Rank a(FakeFabric::roce(), 0, 1), b(FakeFabric::roce(), 1, 0);
  const Error e = errorOf([&] { a.qp.toRtr(b.qp.localRecord()); });  // still in RESET
  CHECK(e.code() == ErrorCode::System);
  CHECK(e.peer() == 1);
  CHECK_THAT(e.what(), Catch::Contains("ibv_modify_qp(INIT->RTR)") && Catch::Contains("for peer 1") &&
                           Catch::Contains("errno 22") &&
                           Catch::Contains("STATE|AV|PATH_MTU|RQ_PSN|MIN_RNR_TIMER|MAX_DEST_RD_ATOMIC|DEST_QPN"));
}

TEST_CASE("failed and missing completions become errors", "[rdma][bringup]") {
  Rank a(FakeFabric::roce(), 0, 1), b(FakeFabric::roce(), 1, 0);
  a.qp.connect(b.qp.localRecord());  // b never connects back
  std::vector<unsigned char> buffer(64);
  MemoryRegion mr(a.context, buffer.data(), buffer.size(), IBV_ACCESS_LOCAL_WRITE);
  a.qp.postWrite(buffer.data(), 8, mr.lkey(), 0x1000, 1);
  const Error e = errorOf([&] { a.context.waitCompletions(1, 2s); });
  CHECK(e.code() == ErrorCode::System);
  CHECK(e.peer() == 1);
  CHECK_THAT(e.what(), Catch::Contains("work request to peer 1") && Catch::Contains("status 12"));

  Rank c(FakeFabric::roce(), 0, 1);
  const auto start = std::chrono::steady_clock::now();
  CHECK(errorOf([&] { c.context.waitCompletions(1, 50ms); }).code() == ErrorCode::Timeout);
  CHECK(std::chrono::steady_clock::now() - start >= 50ms);
}

TEST_CASE("a write outside the remote region or with a stale rkey fails remotely", "[rdma][bringup]") {
  Rank a(FakeFabric::roce(), 0, 1), b(FakeFabric::roce(), 1, 0);
  a.qp.connect(b.qp.localRecord());
  b.qp.connect(a.qp.localRecord());
  std::vector<unsigned char> src(64, 7), dst(64, 0);
  MemoryRegion srcMr(a.context, src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
  MemoryRegion dstMr(b.context, dst.data(), dst.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  a.qp.postWrite(src.data(), 64, srcMr.lkey(), dstMr.record().addr + 1, dstMr.rkey());  // one byte past the end
  CHECK_THROWS_WITH(a.context.waitCompletions(1, 2s), Catch::Contains("remote access error"));
  CHECK(std::all_of(dst.begin(), dst.end(), [](unsigned char v) { return v == 0; }));
}
