// QpRecord / MrRecord: explicit little-endian layout and round trips.
#include <catch2/catch.hpp>

#include "tether/rdma/records.hpp"

using namespace tether::rdma;

namespace {
QpRecord sampleRecord() {
  QpRecord r;
  r.srcRank = 0x01020304;
  r.dstRank = 7;
  r.qpn = 0x123456;
  r.psn = 0xabcdef;
  r.lid = 0xbeef;
  r.port = 2;
  r.linkLayer = 2;
  r.activeMtu = 3;
  r.gidIndex = 5;
  r.maxRdAtomic = 4;
  r.maxDestRdAtomic = 8;
  for (int i = 0; i < 16; ++i) r.gid[i] = static_cast<uint8_t>(0xa0 + i);
  return r;
}
}  // namespace

TEST_CASE("QpRecord encodes every field little-endian at its documented offset", "[rdma][records]") {
  const auto b = encode(sampleRecord());
  REQUIRE(b.size() == 64);
  CHECK(std::string(b.begin(), b.begin() + 4) == "TQPR");
  CHECK((b[4] == 1 && b[5] == 0));                                         // version
  CHECK((b[6] == 64 && b[7] == 0));                                        // size
  CHECK((b[8] == 0x04 && b[11] == 0x01));                                  // srcRank
  CHECK(b[12] == 7);                                                       // dstRank
  CHECK((b[16] == 0x56 && b[17] == 0x34 && b[18] == 0x12 && b[19] == 0));  // qpn
  CHECK((b[20] == 0xef && b[21] == 0xcd && b[22] == 0xab));                // psn
  CHECK((b[24] == 0xef && b[25] == 0xbe));                                 // lid
  CHECK(b[26] == 2);
  CHECK(b[27] == 2);
  CHECK(b[28] == 3);
  CHECK(b[29] == 5);
  CHECK(b[30] == 4);
  CHECK(b[31] == 8);
  CHECK((b[32] == 0xa0 && b[47] == 0xaf));  // gid in network order, as ibv_gid.raw
  for (std::size_t i = 48; i < 64; ++i) CHECK(b[i] == 0);
}

TEST_CASE("QpRecord decodes what it encoded", "[rdma][records]") {
  const QpRecord in = sampleRecord();
  const auto bytes = encode(in);
  const QpRecord out = decodeQpRecord(bytes.data());
  CHECK(out.magic == QpRecord::kMagic);
  CHECK(out.version == 1);
  CHECK(out.size == 64);
  CHECK(out.srcRank == in.srcRank);
  CHECK(out.dstRank == in.dstRank);
  CHECK(out.qpn == in.qpn);
  CHECK(out.psn == in.psn);
  CHECK(out.lid == in.lid);
  CHECK(out.port == in.port);
  CHECK(out.linkLayer == in.linkLayer);
  CHECK(out.activeMtu == in.activeMtu);
  CHECK(out.gidIndex == in.gidIndex);
  CHECK(out.maxRdAtomic == in.maxRdAtomic);
  CHECK(out.maxDestRdAtomic == in.maxDestRdAtomic);
  CHECK(out.gid == in.gid);
  CHECK(out.flags == 0);
}

TEST_CASE("a zeroed buffer decodes to zero fields, not to a default record", "[rdma][records]") {
  const unsigned char zeros[64] = {};
  const QpRecord r = decodeQpRecord(zeros);
  CHECK(r.magic == 0);
  CHECK(r.version == 0);
  CHECK(r.qpn == 0);
}

TEST_CASE("MrRecord layout and round trip", "[rdma][records]") {
  MrRecord in;
  in.rank = 3;
  in.rkey = 0xdeadbeef;
  in.addr = 0x00007f0011223344ull;
  in.length = 0x100000001ull;
  const auto b = encode(in);
  REQUIRE(b.size() == 32);
  CHECK(std::string(b.begin(), b.begin() + 4) == "TMRR");
  CHECK((b[12] == 0xef && b[15] == 0xde));
  CHECK((b[16] == 0x44 && b[21] == 0x7f && b[23] == 0));
  CHECK((b[24] == 1 && b[28] == 1));
  const MrRecord out = decodeMrRecord(b.data());
  CHECK(out.rank == 3);
  CHECK(out.rkey == in.rkey);
  CHECK(out.addr == in.addr);
  CHECK(out.length == in.length);
}

TEST_CASE("describe() shows the fields a person debugging needs", "[rdma][records]") {
  const std::string text = describe(sampleRecord());
  CHECK_THAT(text, Catch::Contains("qpn 0x123456"));
  CHECK_THAT(text, Catch::Contains("mtu 1024"));
  CHECK_THAT(text, Catch::Contains("ETH"));
}
