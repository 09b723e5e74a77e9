// Frame header and handshake messages: byte layout, round trips, and every
// rejection path of the decoders.
#include <catch2/catch.hpp>

#include <cstring>

#include "base/crypto.hpp"
#include "wire/frame.hpp"
#include "wire/handshake.hpp"
#include "wire/host_table.hpp"
#include "wire/notice.hpp"

using namespace tether;
using namespace tether::wire;

namespace {

// n addresses, 127.0.0.i:1000+i on host 42.
std::vector<PeerAddress> addresses(int n) {
  std::vector<PeerAddress> table(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < table.size(); ++i) {
    table[i].family = 4;
    table[i].addr[0] = 127;
    table[i].addr[3] = static_cast<std::uint8_t>(i);
    table[i].port = static_cast<std::uint16_t>(1000 + i);
    table[i].hostId = 42;
  }
  return table;
}

}  // namespace

TEST_CASE("frame header: little-endian layout, byte by byte", "[unit][wire]") {
  FrameHeader h;
  h.kind = Kind::Collective;
  h.comm = 0x0102030405060708ULL;
  h.coll = 0x1112131415161718ULL;
  h.step = 0x21222324;
  h.tag = static_cast<std::uint32_t>(OpCode::Alltoall);
  h.length = 0x3132333435363738ULL;
  h.root = 0x41424344;
  auto b = encodeHeader(h);
  const unsigned char expected[kHeaderBytes] = {
      0x54, 0x54, 0x48, 0x52,                          // magic "TTHR"
      0x04, 0x00,                                      // version 4
      0x08,                                            // kind Collective
      0x00,                                            // flags
      0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,  // comm
      0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11,  // coll
      0x24, 0x23, 0x22, 0x21,                          // step
      0x02, 0x00, 0x00, 0x00,                          // tag (alltoall)
      0x38, 0x37, 0x36, 0x35, 0x34, 0x33, 0x32, 0x31,  // length
      0x44, 0x43, 0x42, 0x41,                          // root
      0x00, 0x00, 0x00, 0x00,                          // reserved
  };
  CHECK(std::memcmp(b.data(), expected, kHeaderBytes) == 0);
  std::string why;
  auto d = decodeHeader(b.data(), ~0ULL, &why);
  REQUIRE(d);
  CHECK(d->kind == Kind::Collective);
  CHECK(d->comm == h.comm);
  CHECK(d->coll == h.coll);
  CHECK(d->step == h.step);
  CHECK(d->tag == h.tag);
  CHECK(d->length == h.length);
  CHECK(d->root == h.root);
  CHECK(describe(*d).find("alltoall#1230066625199609624 step 555885348") == 0);
}

TEST_CASE("frame header: decoder rejects what is not a frame", "[unit][wire]") {
  FrameHeader h;
  h.kind = Kind::P2P;
  h.length = 100;
  auto good = encodeHeader(h);
  std::string why;

  auto b = good;
  b[0] = 'G';
  CHECK_FALSE(decodeHeader(b.data(), 1 << 20, &why));
  CHECK(why.find("bad magic") != std::string::npos);

  b = good;
  b[4] = 3;  // a peer of the previous protocol version (40-byte headers, no root)
  CHECK_FALSE(decodeHeader(b.data(), 1 << 20, &why));
  CHECK(why.find("protocol version 3 (this side speaks 4)") != std::string::npos);

  b = good;
  b[45] = 1;  // the reserved bytes after the root
  CHECK_FALSE(decodeHeader(b.data(), 1 << 20, &why));
  CHECK(why.find("reserved header bytes 0x00000100 (must be 0)") != std::string::npos);

  for (unsigned char kind : {0, 19, 255}) {
    b = good;
    b[6] = kind;
    CHECK_FALSE(decodeHeader(b.data(), 1 << 20, &why));
    CHECK(why.find("unknown frame kind") != std::string::npos);
  }

  // Data frames: the configured maximum; control frames: 64 KiB whatever it is.
  CHECK_FALSE(decodeHeader(good.data(), 99, &why));
  CHECK(why.find("claims 100 payload bytes (limit 99)") != std::string::npos);
  CHECK(decodeHeader(good.data(), 100, &why));
  h.kind = Kind::Hello;
  h.length = kMaxControlPayload + 1;
  b = encodeHeader(h);
  CHECK_FALSE(decodeHeader(b.data(), 1ULL << 40, &why));
  CHECK(why.find("hello frame claims") != std::string::npos);
}

TEST_CASE("handshake messages round-trip and reject truncation", "[unit][wire]") {
  Hello h;
  h.rank = 7;
  h.nranks = 16;
  h.world = 0xabcdef;
  h.nonce.fill(3);
  h.proof.fill(9);
  auto bytes = encode(h);
  CHECK(bytes.size() == 4 + 4 + 8 + 4 + 16 + 32);
  auto d = decodeHello(bytes);
  CHECK(d.rank == 7);
  CHECK(d.nranks == 16);
  CHECK(d.world == 0xabcdef);
  CHECK(d.nonce == h.nonce);
  CHECK(d.proof == h.proof);
  auto cut = bytes;
  cut.pop_back();
  CHECK_THROWS(decodeHello(cut));
  auto longer = bytes;
  longer.push_back(0);
  CHECK_THROWS(decodeHello(longer));

  Reject r{RejectCode::DuplicateRank, "rank 3 is already connected"};
  auto rd = decodeReject(encode(r));
  CHECK(rd.code == RejectCode::DuplicateRank);
  CHECK(rd.reason == r.reason);
  // The codes are numbers on the wire (docs/wire-protocol.md): 9 asks the dialer to dial again.
  auto retry = encode(Reject{RejectCode::Retry, "held"});
  REQUIRE(retry.size() >= 2);
  CHECK(retry[0] == 9);
  CHECK(retry[1] == 0);
  CHECK(decodeReject(retry).code == RejectCode::Retry);

  std::vector<PeerAddress> table = addresses(3);
  auto t = decodeTable(encodeTable(table), 3);
  REQUIRE(t.size() == 3);
  CHECK(t[2].port == 1002);
  CHECK(t[2].addr[3] == 2);
  CHECK_THROWS(decodeTable(encodeTable(table), 4));  // wrong world size
  table[1].port = 0;
  CHECK_THROWS(decodeTable(encodeTable(table), 3));  // port 0 is no address
}

TEST_CASE("handshake proofs: bound to secret, nonces and ranks", "[unit][wire]") {
  Secret secret{};
  secret.fill(1);
  Challenge c;
  c.rank = 0;
  c.nonce.fill(5);
  Hello h;
  h.rank = 3;
  h.nranks = 4;
  h.world = 99;
  h.nonce.fill(6);
  auto p = helloProof(secret, c, h);
  CHECK(p == helloProof(secret, c, h));
  CHECK(p != welcomeProof(secret, c, h));  // the two directions differ

  Secret other = secret;
  other[15] ^= 1;
  CHECK(p != helloProof(other, c, h));  // wrong secret
  auto c2 = c;
  c2.nonce[0] ^= 1;
  CHECK(p != helloProof(secret, c2, h));  // a replay against a fresh challenge fails
  auto h2 = h;
  h2.rank = 2;
  CHECK(p != helloProof(secret, c, h2));  // cannot be re-used for another rank
  h2 = h;
  h2.nranks = 5;
  CHECK(p != helloProof(secret, c, h2));
}

TEST_CASE("abort notices and status probes round-trip and reject truncation", "[unit][wire]") {
  AbortNotice a{5, "rank 5: allgather#3: lost rank 9: connection closed by peer (EOF)", 9};
  auto ab = encode(a);
  CHECK(ab.size() == 4 + 2 + a.reason.size() + 4);
  auto ad = decodeAbortNotice(ab);
  CHECK(ad.origin == 5);
  CHECK(ad.reason == a.reason);
  CHECK(ad.lost == 9);
  CHECK(decodeAbortNotice(encode(AbortNotice{1, "x", kNoRank})).lost == kNoRank);
  auto cut = ab;
  cut.pop_back();
  CHECK_THROWS(decodeAbortNotice(cut));

  const auto cb = encode(CollectiveCredit{0x0102030405060708ULL, 1 << 20});
  const std::vector<unsigned char> cv(cb.begin(), cb.end());
  CHECK(cv[0] == 0x08);  // the communicator first, little-endian
  const auto c = decodeCollectiveCredit(cv);
  CHECK(c.comm == 0x0102030405060708ULL);
  CHECK(c.bytes == 1u << 20);
  CHECK_THROWS(decodeCollectiveCredit(std::vector<unsigned char>(cv.begin(), cv.end() - 1)));
  const auto pb = encodeCredit(77);
  CHECK(decodeCredit(std::vector<unsigned char>(pb.begin(), pb.end())) == 77);

  auto q = decodeStatusQuery(encode(StatusQuery{7, 0x1234, 42}));
  CHECK(q.id == 7);
  CHECK(q.comm == 0x1234);
  CHECK(q.coll == 42);
  auto qb = encode(StatusQuery{});
  qb.push_back(0);
  CHECK_THROWS(decodeStatusQuery(qb));

  auto s = decodeStatusAnswer(encode(StatusAnswer{7, StallState::Running, 3, "in barrier#2", std::nullopt}));
  CHECK(s.id == 7);
  CHECK(s.state == StallState::Running);
  CHECK(s.waitsOn == 3);
  CHECK(s.doing == "in barrier#2");
  CHECK_FALSE(s.detail);
  auto sb = encode(StatusAnswer{});
  sb[4] = 9;  // no such state
  CHECK_THROWS(decodeStatusAnswer(sb));

  // An observer's answer carries the rank's detail after the probe's fields.
  StatusAnswer o{9, StallState::Running, 5, "in allgather#4, waiting for step 1 from rank 5", std::nullopt};
  o.detail = RankDetail{3, 16, "allgather#4 step 1", 1500, 4, "rank 3: barrier#2: timed out"};
  auto ob = encode(o);
  auto od = decodeStatusAnswer(ob);
  REQUIRE(od.detail);
  CHECK(od.detail->rank == 3);
  CHECK(od.detail->nranks == 16);
  CHECK(od.detail->call == "allgather#4 step 1");
  CHECK(od.detail->inCallMs == 1500);
  CHECK(od.detail->linksOpen == 4);
  CHECK(od.detail->lastError == "rank 3: barrier#2: timed out");
  ob.pop_back();
  CHECK_THROWS(decodeStatusAnswer(ob));
}

TEST_CASE("the host leaders' table round-trips and rejects a malformed tree or table", "[unit][wire]") {
  const Bytes table = encodeTable(addresses(6));
  const Bytes good = encodeLeaderTable(2, {2, 4, 5}, table);
  CHECK(good.size() == 4 + 4 + 3 * 4 + table.size());
  auto t = decodeLeaderTable(good, 6);
  CHECK(t.radix == 2);
  CHECK(t.leaders == std::vector<std::uint32_t>{2, 4, 5});
  REQUIRE(t.table);
  CHECK(*t.table == table);
  CHECK(decodeLeaderTable(encodeLeaderTable(8, {}, table), 6).leaders.empty());  // rank 0 leads every group

  auto fails = [](const Bytes& b, std::uint32_t nranks, const std::string& text) {
    try {
      (void)decodeLeaderTable(b, nranks);
    } catch (const std::exception& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(text) != std::string::npos);
      return;
    }
    FAIL("decoded a malformed leader table, expected: " << text);
  };
  fails(encodeLeaderTable(1, {2}, table), 6, "tree radix 1 (at least 2)");
  fails(encodeLeaderTable(2, {4, 2}, table), 6, "leader 1 is rank 2 (leaders must be ascending");
  fails(encodeLeaderTable(2, {2, 2}, table), 6, "leader 1 is rank 2");
  fails(encodeLeaderTable(2, {0}, table), 6, "leader 0 is rank 0");
  fails(encodeLeaderTable(2, {6}, table), 6, "leader 0 is rank 6");
  fails(encodeLeaderTable(2, {1, 2, 3, 4, 5, 6}, table), 6, "lists 6 leaders");  // more than the world's ranks
  Bytes huge = good;
  huge[4] = 0xff, huge[5] = 0xff, huge[6] = 0xff, huge[7] = 0x7f;  // a count the bytes cannot hold
  fails(huge, 1u << 31, "leaders in");
  fails(good, 7, "table lists 6 ranks, expected 7");  // another world size
  Bytes cut = good;
  cut.pop_back();
  fails(cut, 6, "bytes of entries");
  Bytes longer = good;
  longer.push_back(0);
  fails(longer, 6, "bytes of entries");
  fails(Bytes(good.begin(), good.begin() + 6), 6, "message too short");
  fails(Bytes(good.begin(), good.begin() + 8 + 3 * 4), 6, "message too short");  // no table at all
}
