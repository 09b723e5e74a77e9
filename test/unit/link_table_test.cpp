// The link table's close and reopen rules (docs/ordering.md, R3-R7) driven
// through its interface with links that never get a socket: a link set aside
// after a goodbye, epochs, held hellos, deferred dials, admission verdicts and
// what a closed link says about its peer.
#include <catch2/catch.hpp>

#include <boost/asio/io_context.hpp>
#include <optional>

#include "core/link_table.hpp"

using namespace tether;
using link::Verdict;
using wire::RejectCode;

namespace {

// The world's side of the links: a link that closes leaves the table.
struct Sink final : link::LinkSink {
  LinkTable* table = nullptr;
  std::optional<LinkTable::Down> down;
  link::Target onDataHeader(link::Link&, const wire::FrameHeader&, bool) override { return {}; }
  void onDataComplete(link::Link&, const wire::FrameHeader&, const link::Target&,
                      std::vector<unsigned char>&&) override {}
  void onControlFrame(link::Link&, const wire::FrameHeader&, std::vector<unsigned char>&&) override {}
  void onGoodbye(link::Link& l, wire::GoodbyeMode) override { table->setAside(l); }
  void onLinkDown(link::Link& l, const std::string& reason, bool graceful) override {
    down = table->remove(l, reason, graceful);
  }
  void onTransferDone(link::Owner&, bool) override {}
  void onLinkIdle(link::Link&) override {}
};

// Rank `rank` of a world of 4.
struct Table {
  boost::asio::io_context io;
  Sink sink;
  LinkTable table;
  explicit Table(int rank) : table(io, sink, rank, 4, 1 << 20) { sink.table = &table; }
  Verdict admit(int peer, std::uint32_t epoch, bool closing = false) {
    bool duplicate = false;
    return table.admit(peer, epoch, closing, &duplicate);
  }
  // The current link to `peer` says an idle goodbye and is set aside (R1).
  void closeIdle(int peer) {
    auto l = table.current(peer);
    l->sendGoodbye(wire::GoodbyeMode::Idle);
    table.setAside(*l);
  }
};

bool refused(const Verdict& v, RejectCode code) { return v.kind == Verdict::Kind::Reject && v.reject.code == code; }

}  // namespace

TEST_CASE("R5: a link set aside starts a new epoch, and a hello for the old one is refused as stale", "[unit][core]") {
  Table t(0);
  t.table.open(1);
  CHECK(t.table.epoch(1) == 0);
  t.closeIdle(1);
  CHECK_FALSE(t.table.current(1));
  CHECK(t.table.epoch(1) == 1);
  const auto stale = t.admit(1, 0);
  CHECK(refused(stale, RejectCode::Stale));
  CHECK_THAT(stale.reject.reason, Catch::Contains("connection 0 of rank 1 is closed (1 now)"));
}

TEST_CASE(
    "R3 and R4: while our goodbye is unacknowledged hellos wait and a new dial is deferred until the old "
    "link closes",
    "[unit][core]") {
  Table t(0);
  t.table.open(2);
  t.closeIdle(2);
  REQUIRE(t.table.awaitingAck(2));
  CHECK(t.admit(2, 1).kind == Verdict::Kind::Wait);  // R4
  bool released = false;
  auto held = t.table.holdHello(2, link::Clock::now() + std::chrono::hours(1));
  held->async_wait([&](boost::system::error_code) { released = true; });
  t.table.open(2);  // a send needs the peer again: the new link may not dial yet (R3)
  t.table.deferDial(2);
  auto lingering = std::shared_ptr<link::Link>();
  t.table.forEachTo(2, [&](link::Link& l) {
    if (l.goodbyeSent()) lingering = l.shared_from_this();
  });
  REQUIRE(lingering);
  lingering->fail("closed after goodbye");
  REQUIRE(t.sink.down);
  CHECK(t.sink.down->redial);  // the deferred dial goes now
  CHECK_FALSE(t.table.awaitingAck(2));
  t.io.poll();
  CHECK(released);                    // the held hello proceeds
  CHECK_FALSE(t.table.peer(2).gone);  // an idle close: the peer may be dialled again
}

TEST_CASE("R6 and R7: only the current link counts, and a closing rank refuses peers it has no link to",
          "[unit][core]") {
  Table t(3);
  CHECK(refused(t.admit(1, 0, /*closing=*/true), RejectCode::ShuttingDown));
  t.table.open(1);
  CHECK(t.admit(1, 0, true).kind == Verdict::Kind::Welcome);  // a link reserved before the close still connects
  CHECK(refused(t.admit(3, 0), RejectCode::BadRank));         // itself
  CHECK(refused(t.admit(4, 0), RejectCode::BadRank));
}

TEST_CASE("When both ranks dial, the lower rank's connection is kept", "[unit][core]") {
  Table low(0);
  low.table.open(2);  // rank 0 dials rank 2 while rank 2 dials rank 0
  CHECK(refused(low.admit(2, 0), RejectCode::Simultaneous));
  Table high(2);
  high.table.open(0);
  CHECK(high.admit(0, 0).kind == Verdict::Kind::Welcome);
  CHECK(high.table.dialing(0, 0));
  CHECK_FALSE(high.table.dialing(0, 1));  // a dial's outcome belongs to its own epoch (R5)
}

TEST_CASE("A link that breaks without a goodbye loses its peer; a final goodbye makes the loss graceful",
          "[unit][core]") {
  Table t(0);
  t.table.open(1);
  t.table.current(1)->fail("connection reset by peer");
  REQUIRE(t.sink.down);
  CHECK_FALSE(t.sink.down->clean);
  CHECK(t.table.peer(1).gone);
  CHECK_FALSE(t.table.peer(1).graceful);
  CHECK(t.table.peer(1).reason == "connection reset by peer");
  CHECK(t.table.diedCount() == 1);  // collectives look for dead members from now on
  bool duplicate = false;
  CHECK(refused(t.table.admit(1, 0, false, &duplicate), RejectCode::DuplicateRank));
  CHECK(duplicate);  // another process claims a rank this one has lost

  t.table.open(3);
  t.table.peer(3).leaving = true;  // its final goodbye was read
  t.table.current(3)->fail("closed after goodbye");
  CHECK(t.table.peer(3).gone);
  CHECK(t.table.peer(3).graceful);
  CHECK(t.table.diedCount() == 1);  // leaving in order is not dying
  CHECK(t.table.openCount() == 0);
}
