// Remote record validation: every bad field is a Protocol error naming rank, peer, field, value.
#include <catch2/catch.hpp>

#include <infiniband/verbs.h>

#include "tether/error.hpp"
#include "tether/rdma/records.hpp"

using namespace tether::rdma;
using tether::Error;
using tether::ErrorCode;

namespace {

constexpr int kMe = 2;
constexpr int kPeer = 5;

QpRecord roceRecord(uint32_t src, uint32_t dst) {
  QpRecord r;
  r.srcRank = src;
  r.dstRank = dst;
  r.qpn = 0x1234;
  r.psn = 0x42;
  r.port = 1;
  r.linkLayer = IBV_LINK_LAYER_ETHERNET;
  r.activeMtu = IBV_MTU_1024;
  r.gid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 5};
  r.maxRdAtomic = 1;
  r.maxDestRdAtomic = 1;
  return r;
}

QpRecord ibRecord(uint32_t src, uint32_t dst) {
  QpRecord r = roceRecord(src, dst);
  r.linkLayer = IBV_LINK_LAYER_INFINIBAND;
  r.lid = 17;
  r.activeMtu = IBV_MTU_4096;
  r.gid = {};
  return r;
}

// The message of the Protocol error validateRemote raises, or "" if it accepts.
std::string rejection(const QpRecord& remote, const QpRecord& local, bool needsGrh = false) {
  try {
    validateRemote(remote, local, RecordOrigin{kMe, kPeer}, needsGrh);
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Protocol);
    CHECK(e.rank() == kMe);
    CHECK(e.peer() == kPeer);
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a well-formed record from the right peer is accepted", "[rdma][validate]") {
  CHECK(rejection(roceRecord(kPeer, kMe), roceRecord(kMe, kPeer)).empty());
  CHECK(rejection(ibRecord(kPeer, kMe), ibRecord(kMe, kPeer)).empty());
}

TEST_CASE("a zeroed record is rejected, naming the peer and the field", "[rdma][validate]") {
  const unsigned char zeros[QpRecord::kBytes] = {};
  const std::string message = rejection(decodeQpRecord(zeros), roceRecord(kMe, kPeer));
  CHECK_THAT(message, Catch::Contains("rank 2"));
  CHECK_THAT(message, Catch::Contains("peer 5"));
  CHECK_THAT(message, Catch::Contains("magic = 0x0"));
  CHECK_THAT(message, Catch::Contains("zeroed"));
}

TEST_CASE("each invalid field is named with its value", "[rdma][validate]") {
  const QpRecord local = roceRecord(kMe, kPeer);
  struct Case {
    const char* what;
    void (*corrupt)(QpRecord&);
    const char* expect;
  };
  const Case cases[] = {
      {"QPN 0", [](QpRecord& r) { r.qpn = 0; }, "qpn = 0x0"},
      {"QPN 2^24", [](QpRecord& r) { r.qpn = 1u << 24; }, "qpn = 0x1000000"},
      {"PSN 2^24", [](QpRecord& r) { r.psn = 1u << 24; }, "psn = 0x1000000"},
      {"GID 0 on RoCE", [](QpRecord& r) { r.gid = {}; }, "gid = ::"},
      {"unknown version", [](QpRecord& r) { r.version = 2; }, "version = 2"},
      {"wrong size", [](QpRecord& r) { r.size = 48; }, "size = 48"},
      {"another rank's record", [](QpRecord& r) { r.srcRank = 4; }, "srcRank = 4"},
      {"a record meant for another rank", [](QpRecord& r) { r.dstRank = 3; }, "dstRank = 3"},
      {"link layer InfiniBand vs Ethernet",
       [](QpRecord& r) {
         r.linkLayer = IBV_LINK_LAYER_INFINIBAND;
         r.lid = 9;
       },
       "linkLayer = 1"},
      {"unknown link layer", [](QpRecord& r) { r.linkLayer = 0; }, "linkLayer = 0"},
      {"MTU 0", [](QpRecord& r) { r.activeMtu = 0; }, "activeMtu = 0"},
      {"MTU 6", [](QpRecord& r) { r.activeMtu = 6; }, "activeMtu = 6"},
      {"port 0", [](QpRecord& r) { r.port = 0; }, "port = 0"},
      {"reserved bytes", [](QpRecord& r) { r.reserved[3] = 1; }, "reserved"},
      {"placeholder", [](QpRecord& r) { r.flags = QpRecord::kNoQp; }, "no RDMA device"},
      {"unknown flags", [](QpRecord& r) { r.flags = 0x80; }, "flags = 0x80"},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    QpRecord remote = roceRecord(kPeer, kMe);
    c.corrupt(remote);
    const std::string message = rejection(remote, local);
    CHECK_THAT(message, Catch::Contains(c.expect));
    CHECK_THAT(message, Catch::Contains("from peer 5"));
  }
}

TEST_CASE("InfiniBand needs a LID; a GRH needs a GID", "[rdma][validate]") {
  QpRecord remote = ibRecord(kPeer, kMe);
  remote.lid = 0;
  CHECK_THAT(rejection(remote, ibRecord(kMe, kPeer)), Catch::Contains("lid = 0"));
  // An InfiniBand port that requires a GRH cannot use a zero GID either.
  QpRecord noGid = ibRecord(kPeer, kMe);
  CHECK(rejection(noGid, ibRecord(kMe, kPeer), false).empty());
  CHECK_THAT(rejection(noGid, ibRecord(kMe, kPeer), true), Catch::Contains("requires a GRH"));
}

TEST_CASE("path MTU is the smaller of both active MTUs", "[rdma][validate]") {
  QpRecord a = roceRecord(kMe, kPeer), b = roceRecord(kPeer, kMe);
  a.activeMtu = IBV_MTU_4096;
  b.activeMtu = IBV_MTU_1024;
  CHECK(negotiatePathMtu(a, b) == IBV_MTU_1024);
  CHECK(negotiatePathMtu(b, a) == IBV_MTU_1024);
  b.activeMtu = IBV_MTU_4096;
  CHECK(negotiatePathMtu(a, b) == IBV_MTU_4096);
}

TEST_CASE("placeholder records check framing and ranks", "[rdma][validate]") {
  QpRecord p;
  p.srcRank = kPeer;
  p.dstRank = kMe;
  p.flags = QpRecord::kNoQp;
  CHECK_NOTHROW(validatePlaceholder(p, RecordOrigin{kMe, kPeer}));
  p.srcRank = 1;
  CHECK_THROWS_WITH(validatePlaceholder(p, RecordOrigin{kMe, kPeer}), Catch::Contains("srcRank = 1"));
  const QpRecord real = roceRecord(kPeer, kMe);
  CHECK_THROWS_WITH(validatePlaceholder(real, RecordOrigin{kMe, kPeer}), Catch::Contains("flags = 0x0"));
}

TEST_CASE("MR records: rank, address and length are checked", "[rdma][validate]") {
  MrRecord r;
  r.rank = kPeer;
  r.rkey = 0x77;
  r.addr = 0x1000;
  r.length = 4096;
  const RecordOrigin origin{kMe, kPeer, "rdma mr-exchange"};
  CHECK_NOTHROW(validateRemote(r, 4096, origin));
  CHECK_THROWS_WITH(validateRemote(r, 4097, origin), Catch::Contains("length = 4096"));
  MrRecord other = r;
  other.rank = 1;
  CHECK_THROWS_WITH(validateRemote(other, 1, origin), Catch::Contains("MR record from peer 5 has rank = 1"));
  MrRecord noAddr = r;
  noAddr.addr = 0;
  CHECK_THROWS_WITH(validateRemote(noAddr, 1, origin), Catch::Contains("addr = 0"));
  const unsigned char zeros[MrRecord::kBytes] = {};
  CHECK_THROWS_WITH(validateRemote(decodeMrRecord(zeros), 1, origin),
                    Catch::Contains("rdma mr-exchange") && Catch::Contains("magic = 0x0"));
}
