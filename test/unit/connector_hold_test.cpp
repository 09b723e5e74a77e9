// The connector's handshake while the acceptor holds a hello for the peer's
// previous connection (R4 of docs/ordering.md) and one side's handshake
// deadline passes: nobody innocent is blamed. In-memory streams, one
// io_context, one thread; the hold lasts until the test releases it.
#include <catch2/catch.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "link/connector.hpp"
#include "link/frame_io.hpp"
#include "link/link.hpp"
#include "link/memory_stream.hpp"
#include "link_test_support.hpp"
#include "tether/log.hpp"

using namespace tether;
using namespace tether::testsupport;
using namespace std::chrono_literals;

namespace {

// The short handshake deadline: a hold outlasts it, the rest of the handshake
// (a few handlers on one thread) does not, even sanitized on a loaded host
// (20 ms did not: under ASan at load 30-40 the hello itself came late).
constexpr auto kShort = std::chrono::milliseconds(500);

// Both sides got one stream (the dialer no failure), and a frame crosses it.
void bothSidesLinked(boost::asio::io_context& io, FakeAdmission& root, FakeAdmission& member) {
  runUntil(io, [&] { return (!root.streams.empty() && !member.streams.empty()) || !member.failures.empty(); });
  INFO("dialer's failure: " << (member.failures.empty() ? std::string("none") : member.failures[0].reason));
  REQUIRE(member.failures.empty());
  CHECK(root.failures.empty());
  REQUIRE(root.streams.size() == 1);
  REQUIRE(member.streams.size() == 1);
  FakeSink sinkRoot, sinkMember;
  auto l0 = std::make_shared<link::Link>(io, sinkRoot, 1, 0, link::LinkLimits{1ULL << 30, 0});
  auto l1 = std::make_shared<link::Link>(io, sinkMember, 0, 0, link::LinkLimits{1ULL << 30, 1});
  l0->attach(root.streams[0].stream, false);
  l1->attach(member.streams[0].stream, true);
  l1->enqueue(dataFrame(0, 33));
  runUntil(io, [&] { return sinkRoot.frames.size() == 1 || !sinkRoot.downs.empty(); });
  CHECK(sinkRoot.downs.empty());
  checkInOrder(sinkRoot.frames, 1, [](std::uint32_t) { return std::size_t{33}; });
  CHECK(sinkMember.downs.empty());
  l0->fail("test over");
  l1->fail("test over");
}

// Rank 0 accepts at "rank0" and holds every hello (R4) until release(); rank
// 1 dials it. Each with its handshake deadline.
struct HeldDial {
  HeldDial(std::chrono::milliseconds acceptorDeadline, std::chrono::milliseconds dialerDeadline)
      : net(io),
        c0(io, config(0, acceptorDeadline), root, std::make_unique<link::MemoryNetwork>(net)),
        c1(io, config(1, dialerDeadline), member, std::make_unique<link::MemoryNetwork>(net)),
        listener(net.listen("rank0")) {
    c0.listen(listener);
    root.holding = true;
    dial();
  }
  ~HeldDial() { listener->close(); }
  static link::ConnectorConfig config(int rank, std::chrono::milliseconds deadline) {
    auto c = connectorConfig(rank, 0x11);
    c.handshakeTimeout = deadline;
    return c;
  }
  // As World::dial after the rendezvous: the call's deadline (10 s), and a
  // stream the peer cuts is retried only within a window (1 s there) that the
  // acceptor's 10 s handshake deadline outlasts; here it is over at once.
  void dial() {
    const auto now = link::Clock::now();
    c1.dial(0, 0, link::Endpoint{"mem", "rank0"}, link::DialPolicy{now + 10s, false, now});
  }
  void linkCarriesAFrame() { bothSidesLinked(io, root, member); }

  boost::asio::io_context io;
  link::MemoryNetwork net;
  FakeAdmission root, member;
  link::Connector c0, c1;
  std::shared_ptr<link::Listener> listener;
};

// Runs handlers for at least `d` (a pause: what is checked after it holds whatever its length).
void runFor(boost::asio::io_context& io, std::chrono::milliseconds d) {
  bool over = false;
  boost::asio::steady_timer pause(io, d);
  pause.async_wait([&](boost::system::error_code) { over = true; });
  runUntil(io, [&] { return over; });
}

}  // namespace

TEST_CASE("an acceptor whose hold for the peer's previous connection outlasts its handshake deadline tells the "
          "dialer to dial again, and the link comes up once that connection has closed",
          "[unit][link][connector]") {
  HeldDial p(kShort, 10000ms);
  // The first hello is held past the acceptor's deadline: the dialer either
  // retries or gives up on rank 0.
  runUntil(p.io, [&] { return !p.c1.retrying(0).empty() || !p.member.failures.empty(); });
  INFO("dialer's failure: " << (p.member.failures.empty() ? std::string("none") : p.member.failures[0].reason));
  REQUIRE(p.member.failures.empty());
  CHECK_THAT(p.c1.retrying(0), Catch::Contains("dial again"));
  CHECK(p.root.streams.empty());
  CHECK(p.root.failures.empty());
  CHECK(p.root.refusals.empty());
  p.root.release();  // the predecessor has closed
  p.linkCarriesAFrame();
  CHECK(p.c1.retrying(0).empty());
}

TEST_CASE("a dialer whose handshake deadline passes while the acceptor holds its hello keeps waiting for the answer "
          "until the dial's deadline, and the link comes up once the acceptor welcomes it",
          "[unit][link][connector]") {
  HeldDial p(10000ms, kShort);
  runUntil(p.io, [&] { return p.root.waits == 1 || !p.member.failures.empty(); });
  runFor(p.io, 3 * kShort);  // past the dialer's handshake deadline
  CHECK(p.root.waits == 1);           // one hello: the dialer did not cut it and dial again
  CHECK(p.c1.retrying(0).empty());
  CHECK(p.member.failures.empty());
  p.root.release();
  p.linkCarriesAFrame();
  CHECK(p.root.waits == 1);
}

namespace {

// A dialer's stream whose first write (the hello) reaches the peer at once
// but completes `lag` later: a loaded host whose handshake deadline passes
// between the hello leaving and the dialer running again.
class LaggedFirstWrite final : public link::Stream {
 public:
  LaggedFirstWrite(std::shared_ptr<link::Stream> inner, std::chrono::milliseconds lag)
      : inner_(std::move(inner)), lag_(lag) {}
  boost::asio::awaitable<void> connect(const link::Endpoint& to) override { return inner_->connect(to); }
  void readSome(boost::asio::mutable_buffer b, link::ReadDone& done, std::shared_ptr<void> keep) override {
    inner_->readSome(b, done, std::move(keep));
  }
  boost::asio::awaitable<void> read(boost::asio::mutable_buffer b) override { return inner_->read(b); }
  std::size_t writeSomeNow(std::span<const boost::asio::const_buffer> b, boost::system::error_code& ec) override {
    return inner_->writeSomeNow(b, ec);
  }
  boost::asio::awaitable<void> write(std::vector<boost::asio::const_buffer> bufs) override {
    co_await inner_->write(std::move(bufs));
    if (std::exchange(first_, false)) {
      boost::asio::steady_timer t(inner_->executor(), lag_);
      co_await t.async_wait(boost::asio::use_awaitable);
    }
  }
  void close() override { inner_->close(); }
  const std::string& peer() const override { return inner_->peer(); }
  boost::asio::any_io_executor executor() override { return inner_->executor(); }

 private:
  std::shared_ptr<link::Stream> inner_;
  std::chrono::milliseconds lag_;
  bool first_ = true;
};

struct LaggedDialer final : link::Dialer {
  LaggedDialer(link::MemoryNetwork net, std::chrono::milliseconds lag) : net_(std::move(net)), lag_(lag) {}
  std::shared_ptr<link::Stream> open() override { return std::make_shared<LaggedFirstWrite>(net_.open(), lag_); }
  link::MemoryNetwork net_;
  std::chrono::milliseconds lag_;
};

}  // namespace

TEST_CASE(
    "a dialer whose handshake deadline passes while its hello is being written does not cut the stream the "
    "acceptor may already have welcomed, and the link comes up",
    "[unit][link][connector]") {
  // Before: the deadline closed the stream after the hello had left, and
  // the acceptor, having welcomed it, read EOF on a link of a healthy rank
  // ("lost rank 1: connection closed by peer (EOF)"; collectives-short-handshake
  // under load). 3 of 3 with this test on that connector.
  boost::asio::io_context io;
  link::MemoryNetwork net(io);
  FakeAdmission root, member;
  link::Connector c0(io, connectorConfig(0, 0x11), root, std::make_unique<link::MemoryNetwork>(net));
  link::Connector c1(io, HeldDial::config(1, kShort), member, std::make_unique<LaggedDialer>(net, 3 * kShort));
  auto listener = net.listen("rank0");
  c0.listen(listener);
  const auto now = link::Clock::now();
  c1.dial(0, 0, link::Endpoint{"mem", "rank0"}, link::DialPolicy{now + 10s, false, now + 1s});
  bothSidesLinked(io, root, member);  // one hello welcomed: the dialer did not cut it and dial again
  listener->close();
}

TEST_CASE("an acceptor that closes after its challenge and our hello without answering is a busy peer, not a lost "
          "one, and is dialled again until the dial's deadline, then the dial fails naming the peer",
          "[unit][link][connector]") {
  // Its handshake deadline passed before our hello came (a loaded host, a
  // short TETHER_HANDSHAKE_TIMEOUT_MS). Before: the dialer gave up after its
  // 1 s window for cut streams and its rank reported a live peer lost
  // (collectives-short-handshake in CI: "lost rank 0: cannot connect to rank
  // 0 ...: rejected us as a duplicate rank" after rank 0's "End of file").
  boost::asio::io_context io;
  link::MemoryNetwork net(io);
  FakeAdmission member;
  link::Connector c1(io, connectorConfig(1, 0x11), member, std::make_unique<link::MemoryNetwork>(net));
  auto listener = net.listen("silent");
  int hellos = 0, accepted = 0, handled = 0;
  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        for (;;) {
          auto s = co_await listener->accept();
          ++accepted;
          try {
            wire::Challenge challenge;
            challenge.rank = 0;
            co_await link::writeFrame(*s, wire::Kind::Challenge, wire::encode(challenge));
            auto f = co_await link::readFrame(*s, wire::kMaxControlPayload);
            hellos += f.header.kind == wire::Kind::Hello;
          } catch (const std::exception&) {
            // the dialer closed first: no hello on this stream
          }
          ++handled;
          s->close();
        }
      },
      boost::asio::detached);
  const auto now = link::Clock::now();
  c1.dial(0, 0, link::Endpoint{"mem", "silent"}, link::DialPolicy{now + 1500ms, false, now});
  runUntil(io, [&] { return !member.failures.empty(); });
  runUntil(io, [&] { return handled == accepted; });  // a hello still on its way is counted
  listener->close();
  CHECK(hellos > 1);
  CHECK(member.streams.empty());
  const auto& f = member.failures[0];
  INFO(f.reason);
  // Every attempt wrote its hello, but a last one that the dial's deadline cut
  // before the challenge came (the acceptor ran late on a loaded host: 1 in 20
  // runs under CI's TSan stage, ASan CI on f8a7047 '15 == 14').
  if (f.attempts != hellos) {
    CHECK(f.attempts == hellos + 1);
    CHECK_THAT(f.reason, Catch::Contains("connected, but no answer by the dial's deadline"));
  }
  CHECK_FALSE(f.refused);
  CHECK(f.retriesExhausted);
  CHECK(link::Clock::now() >= now + 1500ms);
  CHECK_THAT(f.reason, Catch::StartsWith("cannot connect to rank 0 at silent: "));
}

TEST_CASE(
    "a dialer queued at a busy acceptor past its handshake deadline keeps its place and is served, without "
    "cutting the connection and dialling again",
    "[unit][link][connector]") {
  // Before: the dialer cut its queued connection at its handshake deadline
  // and dialled again; the acceptor later dropped the dead one ("dropped
  // incoming connection ... End of file"; hundreds at once at 1,024 ranks).
  std::vector<std::string> dropped;
  struct Capture {  // removed however the test ends: a failed REQUIRE must not leave it pointing here
    explicit Capture(std::vector<std::string>& into) {
      tether::setLogHandler([&into](tether::LogLevel, const std::string& line) {
        if (line.find("dropped incoming connection") != std::string::npos) into.push_back(line);
      });
    }
    ~Capture() { tether::setLogHandler(nullptr); }
  } capture(dropped);
  boost::asio::io_context io;
  link::MemoryNetwork net(io);
  FakeAdmission root, member;
  link::Connector c0(io, connectorConfig(0, 0x11), root, std::make_unique<link::MemoryNetwork>(net));
  link::Connector c1(io, HeldDial::config(1, kShort), member, std::make_unique<link::MemoryNetwork>(net));
  auto listener = net.listen("rank0");  // connections queue; nobody accepts yet
  const auto now = link::Clock::now();
  c1.dial(0, 0, link::Endpoint{"mem", "rank0"}, link::DialPolicy{now + 10s, false, now + 1s});
  runFor(io, 3 * kShort);  // past the dialer's handshake deadline, still queued
  c0.listen(listener);     // the acceptor gets to its queue
  bothSidesLinked(io, root, member);
  runFor(io, 100ms);
  listener->close();
  CHECK(dropped.empty());
}

TEST_CASE(
    "a rank shutting down refuses a late dial with an info line, not a warning: the dialer is told why, and an "
    "orderly close is not reported as a fault",
    "[unit][link][connector]") {
  // Before: every such refusal was a WARN line on the refusing rank; at 256
  // ranks a clean end of tether-bench printed a few (a rank whose idle link
  // the root had closed dialled it back as the root closed).
  std::vector<std::pair<tether::LogLevel, std::string>> lines;
  struct Capture {  // removed however the test ends
    explicit Capture(std::vector<std::pair<tether::LogLevel, std::string>>& into) : level(tether::logLevel()) {
      tether::setLogLevel(tether::LogLevel::Info);
      tether::setLogHandler([&into](tether::LogLevel l, const std::string& line) {
        if (line.find("refused connection") != std::string::npos) into.emplace_back(l, line);
      });
    }
    ~Capture() {
      tether::setLogHandler(nullptr);
      tether::setLogLevel(level);
    }
    tether::LogLevel level;
  } capture(lines);
  boost::asio::io_context io;
  link::MemoryNetwork net(io);
  FakeAdmission root, member;
  root.verdict = link::Verdict::refuse(wire::RejectCode::ShuttingDown, "this rank is shutting down");
  link::Connector c0(io, connectorConfig(0, 0x11), root, std::make_unique<link::MemoryNetwork>(net));
  link::Connector c1(io, connectorConfig(1, 0x11), member, std::make_unique<link::MemoryNetwork>(net));
  auto listener = net.listen("rank0");
  c0.listen(listener);
  const auto now = link::Clock::now();
  c1.dial(0, 0, link::Endpoint{"mem", "rank0"}, link::DialPolicy{now + 10s, false, now});
  runUntil(io, [&] { return !member.failures.empty(); });
  listener->close();
  REQUIRE(member.failures.size() == 1);
  CHECK(member.failures[0].peerClosing);
  CHECK_THAT(member.failures[0].reason, Catch::Contains("is shutting down"));
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].first == tether::LogLevel::Info);
  CHECK_THAT(lines[0].second, Catch::Contains("(claims rank 1): this rank is shutting down"));
}
