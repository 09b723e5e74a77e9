// GID index choice over IB tables, RoCE v1+v2 tables, overrides and the per-index fallback.
#include <catch2/catch.hpp>

#include <sys/socket.h>

#include <cerrno>

#include "tether/error.hpp"
#include "tether/rdma/fake_verbs.hpp"
#include "tether/rdma/gid.hpp"

using namespace tether::rdma;
using tether::Error;
using tether::ErrorCode;

namespace {

// The entries readGidTable returns for port 1 of the fabric's first device.
std::vector<ibv_gid_entry> tableOf(Verbs& verbs) {
  std::vector<std::string> names;
  REQUIRE(verbs.listDevices(names) == 0);
  ibv_context* context = verbs.openDevice(names.at(0));
  REQUIRE(context != nullptr);
  ibv_port_attr port{};
  REQUIRE(verbs.queryPort(context, 1, &port) == 0);
  auto entries = readGidTable(verbs, context, 1, port, "test");
  verbs.closeDevice(context);
  return entries;
}

// A device whose kernel lacks ibv_query_gid_table, so entries come from ibv_query_gid_ex.
class NoTableVerbs : public FakeVerbs {
 public:
  using FakeVerbs::FakeVerbs;
  long queryGidTable(ibv_context*, ibv_gid_entry*, std::size_t) override { return -EOPNOTSUPP; }
};

FakeGid v2(std::array<uint8_t, 16> raw) { return FakeGid{raw, IBV_GID_TYPE_ROCE_V2}; }

}  // namespace

TEST_CASE("the RoCE preset's table reads with empty slots skipped", "[rdma][gid]") {
  FakeVerbs verbs(FakeFabric::roce());
  const auto entries = tableOf(verbs);
  REQUIRE(entries.size() == 5);  // slot 4 is empty
  CHECK(entries[3].gid_index == 3);
  CHECK(entries[3].gid_type == IBV_GID_TYPE_ROCE_V2);
  CHECK(entries[4].gid_index == 5);
}

TEST_CASE("without ibv_query_gid_table the entries come from ibv_query_gid_ex", "[rdma][gid]") {
  FakeVerbs table(FakeFabric::roce());
  NoTableVerbs perIndex(FakeFabric::roce());
  const auto a = tableOf(table);
  const auto b = tableOf(perIndex);
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].gid_index == b[i].gid_index);
    CHECK(a[i].gid_type == b[i].gid_type);
  }
}

TEST_CASE("InfiniBand uses GID index 0", "[rdma][gid]") {
  FakeVerbs verbs(FakeFabric::infiniband());
  const GidChoice c = chooseGid(tableOf(verbs), IBV_LINK_LAYER_INFINIBAND, AF_INET, -1, "test");
  CHECK(c.index == 0);
  CHECK(c.type == IBV_GID_TYPE_IB);
  CHECK(c.gid.raw[0] == 0xfe);
}

TEST_CASE("RoCE v1+v2 table: RoCE v2 of the wanted family wins", "[rdma][gid]") {
  FakeVerbs verbs(FakeFabric::roce());
  const auto entries = tableOf(verbs);
  const GidChoice v4 = chooseGid(entries, IBV_LINK_LAYER_ETHERNET, AF_INET, -1, "test");
  CHECK(v4.index == 3);  // ::ffff:10.x.y.z, RoCE v2 (index 2 is the same address as v1)
  CHECK(v4.type == IBV_GID_TYPE_ROCE_V2);
  CHECK(isIpv4MappedGid(v4.gid));
  const GidChoice v6 = chooseGid(entries, IBV_LINK_LAYER_ETHERNET, AF_INET6, -1, "test");
  CHECK(v6.index == 5);  // the global IPv6 v2 beats the link-local v2 at index 1
  CHECK(v6.type == IBV_GID_TYPE_ROCE_V2);
}

TEST_CASE("RoCE falls back to the other family, then to v1", "[rdma][gid]") {
  FakeFabric fabric = FakeFabric::roce();
  auto& gids = fabric.devices[0].ports[0].gids;
  gids[3].reset();  // no IPv4 v2
  gids[5].reset();  // no global IPv6
  {
    FakeVerbs verbs(fabric);
    const GidChoice c = chooseGid(tableOf(verbs), IBV_LINK_LAYER_ETHERNET, AF_INET, -1, "test");
    CHECK(c.index == 1);  // link-local v2 (other family) before any v1
    CHECK_THAT(c.reason, Catch::Contains("no entry of the wanted address family"));
  }
  gids[1].reset();
  FakeVerbs verbs(fabric);
  const GidChoice c = chooseGid(tableOf(verbs), IBV_LINK_LAYER_ETHERNET, AF_INET, -1, "test");
  CHECK(c.index == 2);  // IPv4 v1
  CHECK(c.type == IBV_GID_TYPE_ROCE_V1);
}

TEST_CASE("TETHER_IB_GID_INDEX overrides the choice and must name a valid entry", "[rdma][gid]") {
  FakeVerbs verbs(FakeFabric::roce());
  const auto entries = tableOf(verbs);
  const GidChoice c = chooseGid(entries, IBV_LINK_LAYER_ETHERNET, AF_INET, 0, "test");
  CHECK(c.index == 0);
  CHECK(c.type == IBV_GID_TYPE_ROCE_V1);
  CHECK_THAT(c.reason, Catch::Contains("TETHER_IB_GID_INDEX"));
  try {
    chooseGid(entries, IBV_LINK_LAYER_ETHERNET, AF_INET, 4, "fake_roce0:1");  // the empty slot
    FAIL("an empty slot was accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
    CHECK_THAT(e.what(), Catch::Contains("TETHER_IB_GID_INDEX=4") && Catch::Contains("fake_roce0:1"));
  }
}

TEST_CASE("a RoCE port without any usable GID is a clear error", "[rdma][gid]") {
  std::vector<ibv_gid_entry> none;
  CHECK_THROWS_WITH(chooseGid(none, IBV_LINK_LAYER_ETHERNET, AF_INET, -1, "eth0dev:1"),
                    Catch::Contains("no usable RoCE GID on eth0dev:1"));
  // IB-type entries do not count on Ethernet.
  FakeVerbs ib(FakeFabric::infiniband());
  CHECK_THROWS_AS(chooseGid(tableOf(ib), IBV_LINK_LAYER_ETHERNET, AF_INET, -1, "x"), Error);
}

TEST_CASE("only entries of the asked port are returned", "[rdma][gid]") {
  FakeFabric fabric = FakeFabric::roce();
  FakePort second = fabric.devices[0].ports[0];
  second.gids = {v2({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 168, 0, 9})};
  fabric.devices[0].ports.push_back(second);
  FakeVerbs verbs(fabric);
  const auto entries = tableOf(verbs);  // port 1
  CHECK(entries.size() == 5);
  for (const auto& e : entries) CHECK(e.port_num == 1);
}
