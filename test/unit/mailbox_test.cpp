// The mailbox: full-key matching, FIFO per point-to-point key, duplicates.
#include <catch2/catch.hpp>

#include "match/mailbox.hpp"

using namespace tether;
using namespace tether::match;

namespace {
Key coll(std::uint32_t src, std::uint64_t c, std::uint32_t step, wire::OpCode op) {
  return Key{src, 1, wire::Kind::Collective, c, step, static_cast<std::uint32_t>(op)};
}
Key p2p(std::uint32_t src, std::uint32_t tag) { return Key{src, 1, wire::Kind::P2P, 0, 0, tag}; }
match::Stashed frame(std::uint64_t length, unsigned char fill) {
  match::Stashed s;
  s.header.length = length;
  s.payload.assign(length, fill);
  return s;
}
}  // namespace

TEST_CASE("a receive matches only its exact key", "[unit][match]") {
  Mailbox m;
  int a = 0, b = 0;
  m.post(coll(2, 5, 0, wire::OpCode::Alltoall), Posted{&a, 4, &a});
  // Same peer, same tag-like position: another collective, another step, another op.
  CHECK_FALSE(m.claimPosted(coll(2, 6, 0, wire::OpCode::Alltoall)));
  CHECK_FALSE(m.claimPosted(coll(2, 5, 1, wire::OpCode::Alltoall)));
  CHECK_FALSE(m.claimPosted(coll(2, 5, 0, wire::OpCode::Barrier)));
  CHECK_FALSE(m.claimPosted(coll(3, 5, 0, wire::OpCode::Alltoall)));
  Key otherComm = coll(2, 5, 0, wire::OpCode::Alltoall);
  otherComm.comm = 2;
  CHECK_FALSE(m.claimPosted(otherComm));
  CHECK_FALSE(m.claimPosted(p2p(2, 0)));
  auto got = m.claimPosted(coll(2, 5, 0, wire::OpCode::Alltoall));
  REQUIRE(got);
  CHECK(got->buf == &a);
  CHECK(m.postedCount() == 0);
  (void)b;
}

TEST_CASE("point-to-point receives and frames are first in, first out per key", "[unit][match]") {
  Mailbox m;
  int r1 = 0, r2 = 0;
  m.post(p2p(1, 7), Posted{&r1, 4, &r1});
  m.post(p2p(1, 7), Posted{&r2, 4, &r2});
  CHECK(m.claimPosted(p2p(1, 7))->buf == &r1);
  CHECK(m.claimPosted(p2p(1, 7))->buf == &r2);
  CHECK_FALSE(m.claimPosted(p2p(1, 7)));

  CHECK(m.stash(p2p(1, 7), frame(1, 'a')));
  CHECK(m.stash(p2p(1, 7), frame(1, 'b')));  // p2p: a queue, not a duplicate
  CHECK(m.stash(p2p(1, 8), frame(1, 'c')));
  CHECK(m.takeStashed(p2p(1, 7))->payload[0] == 'a');
  CHECK(m.takeStashed(p2p(1, 8))->payload[0] == 'c');
  CHECK(m.takeStashed(p2p(1, 7))->payload[0] == 'b');
  CHECK(m.stashedCount() == 0);
}

TEST_CASE("early collective frames wait under the full key; a second one is a duplicate", "[unit][match]") {
  Mailbox m;
  auto k = coll(4, 9, 2, wire::OpCode::Allgather);
  CHECK(m.stash(k, frame(8, 1)));
  CHECK_FALSE(m.stash(k, frame(8, 2)));
  CHECK(m.stashedCount() == 1);
  int seen = 0;
  m.forEachStashed([&](const Key& key, const Stashed& s) {
    CHECK(key == k);
    CHECK(s.payload[0] == 1);
    ++seen;
  });
  CHECK(seen == 1);
  CHECK_FALSE(m.takeStashed(coll(4, 9, 2, wire::OpCode::Broadcast)));
  CHECK(m.dropStashed([&](const Key& key) { return key.coll == 9; }) == 1);
  CHECK_FALSE(m.takeStashed(k));
}

TEST_CASE("unpost withdraws only its owner's receive", "[unit][match]") {
  Mailbox m;
  int a = 0, b = 0;
  m.post(p2p(0, 1), Posted{&a, 4, &a});
  m.post(p2p(0, 1), Posted{&b, 4, &b});
  CHECK(m.unpost(p2p(0, 1), &a));
  CHECK_FALSE(m.unpost(p2p(0, 1), &a));
  CHECK(m.claimPosted(p2p(0, 1))->owner == &b);
}
