// Links and the connector over in-memory streams (lib/link/memory_stream.hpp):
// framing with partial reads and writes, the goodbye exchange, a peer lost
// mid-frame, and the handshake's admission of the secret. One io_context, one
// thread, no sockets, no fork.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "link/connector.hpp"
#include "link/frame_io.hpp"
#include "link/frame_queue.hpp"
#include "link/frame_reader.hpp"
#include "link/link.hpp"
#include "link/memory_stream.hpp"
#include "link_test_support.hpp"

using namespace tether;
using link::Link;
using namespace tether::testsupport;

namespace {

// A stream that counts the reads and writes a link makes on the stream it wraps.
struct CountingStream final : link::Stream {
  explicit CountingStream(std::shared_ptr<link::Stream> s) : inner(std::move(s)) {}
  boost::asio::awaitable<void> connect(const link::Endpoint& to) override { return inner->connect(to); }
  void readSome(boost::asio::mutable_buffer buf, link::ReadDone& done, std::shared_ptr<void> keep) override {
    ++reads;
    inner->readSome(buf, done, std::move(keep));
  }
  boost::asio::awaitable<void> read(boost::asio::mutable_buffer buf) override { return inner->read(buf); }
  std::size_t writeSomeNow(std::span<const boost::asio::const_buffer> bufs, boost::system::error_code& ec) override {
    ++writes;
    return inner->writeSomeNow(bufs, ec);
  }
  boost::asio::awaitable<void> write(std::vector<boost::asio::const_buffer> bufs) override {
    ++writes;
    return inner->write(std::move(bufs));
  }
  void close() override { inner->close(); }
  const std::string& peer() const override { return inner->peer(); }
  boost::asio::any_io_executor executor() override { return inner->executor(); }
  std::shared_ptr<link::Stream> inner;
  int reads = 0, writes = 0;
};

// An operation that owns referenced payloads.
struct TestOwner final : link::Owner {};

struct LinkedPair {
  LinkedPair(boost::asio::io_context& io, link::MemoryOptions options) {
    auto [sa, sb] = link::memoryPair(io, options, "mem:rank0", "mem:rank1");
    a = std::make_shared<Link>(io, sinkA, 1, 0, link::LinkLimits{1ULL << 30, 0});
    b = std::make_shared<Link>(io, sinkB, 0, 0, link::LinkLimits{1ULL << 30, 1});
    streamA = sa;
    streamB = sb;
  }
  void attach() {
    a->attach(streamA, true);
    b->attach(streamB, false);
  }
  // Neither link went down during the test; closes both.
  void endHealthy() {
    CHECK(sinkA.downs.empty());
    CHECK(sinkB.downs.empty());
    a->fail("test over");
    b->fail("test over");
  }
  FakeSink sinkA, sinkB;
  std::shared_ptr<link::Stream> streamA, streamB;
  std::shared_ptr<Link> a, b;
};

}  // namespace

TEST_CASE("two links over an in-memory pair exchange frames in order when reads arrive 1 to 7 bytes at a time",
          "[unit][link]") {
  boost::asio::io_context io;
  LinkedPair p(io, link::MemoryOptions{7, 0, 42});
  p.attach();
  CHECK(p.a->remote() == "mem:rank1");
  auto len = [](std::uint32_t i) { return std::size_t{i % 97}; };
  for (std::uint32_t i = 0; i < 300; ++i) {
    p.a->enqueue(dataFrame(i, len(i)));
    if (i < 200) p.b->enqueue(dataFrame(i, len(i)));
  }
  runUntil(io, [&] { return p.sinkB.frames.size() >= 300 && p.sinkA.frames.size() >= 200; });
  checkInOrder(p.sinkB.frames, 300, len);
  checkInOrder(p.sinkA.frames, 200, len);
  CHECK(p.a->idle());
  p.endHealthy();
}

TEST_CASE(
    "a sink that throws while a frame is read fails its link with the reason, instead of leaving the link "
    "unread or the exception to the event loop",
    "[unit][link]") {
  // Before c485e9a the read loop was a detached coroutine: such an exception
  // ended it silently and the link stayed up, unread, until the peers'
  // deadlines. Since, until this check, it left the handler and the event
  // loop's run() (the progress thread: std::terminate).
  boost::asio::io_context io;
  LinkedPair p(io, link::MemoryOptions{0, 0, 1});
  p.sinkB.failOnData = "the sink could not take it";
  p.attach();
  p.a->enqueue(dataFrame(0, 40));
  runUntil(io, [&] { return !p.sinkB.downs.empty(); });
  REQUIRE(p.sinkB.downs.size() == 1);
  CHECK_THAT(p.sinkB.downs[0], Catch::Contains("reading failed: the sink could not take it"));
  CHECK(p.b->state() == Link::State::Closed);
  p.a->fail("test over");
}

TEST_CASE("a gathered write of many queued frames arrives whole through a stream that takes 100 bytes at a time",
          "[unit][link]") {
  boost::asio::io_context io;
  LinkedPair p(io, link::MemoryOptions{7, 100, 7});
  // Queued while dialing: attach() writes them as gathered writes of up to
  // 64 frames, most of which wait for the small stream buffer to drain. One
  // large frame is read straight into its destination.
  auto len = [](std::uint32_t i) { return i == 150 ? std::size_t{200000} : std::size_t{i % 13 + 1}; };
  for (std::uint32_t i = 0; i < 400; ++i) p.a->enqueue(dataFrame(i, len(i)));
  CHECK_FALSE(p.a->idle());
  p.attach();
  runUntil(io, [&] { return p.sinkB.frames.size() >= 400 && p.a->idle(); });
  checkInOrder(p.sinkB.frames, 400, len);
  p.endHealthy();
}

TEST_CASE("a link makes one read per arriving frame and one gathered write per frame sent, with no other stream call",
          "[unit][link]") {
  // The Stream seam has no separate wait for readiness: over a socket the one
  // read is an async_read_some, which does not re-arm the descriptor.
  boost::asio::io_context io;
  LinkedPair p(io, link::MemoryOptions{});
  auto countingA = std::make_shared<CountingStream>(p.streamA);
  auto countingB = std::make_shared<CountingStream>(p.streamB);
  p.a->attach(countingA, true);
  p.b->attach(countingB, false);
  constexpr std::uint32_t kFrames = 50;
  for (std::uint32_t i = 0; i < kFrames; ++i) {
    p.a->enqueue(dataFrame(i, 64));
    runUntil(io, [&] { return p.sinkB.frames.size() == i + 1; });
  }
  checkInOrder(p.sinkB.frames, kFrames, [](std::uint32_t) { return std::size_t{64}; });
  CHECK(countingA->writes == static_cast<int>(kFrames));
  CHECK(countingB->reads == static_cast<int>(kFrames) + 1);  // one per frame, and the one waiting now
  CHECK(countingB->writes == 0);
  p.endHealthy();
}

TEST_CASE("when the stream takes only part of a gathered write the rest is copied, the callers' buffers are free at once, "
          "and the bytes arrive intact and in order",
          "[unit][link]") {
  boost::asio::io_context io;
  LinkedPair p(io, link::MemoryOptions{0, 1000, 11});  // 1,000 bytes in flight, then the writer waits
  constexpr std::uint32_t kFrames = 3;
  constexpr std::size_t kLen = 700;
  std::vector<std::vector<unsigned char>> callers(kFrames);
  std::vector<TestOwner> owners(kFrames);
  for (std::uint32_t i = 0; i < kFrames; ++i) {
    auto f = dataFrame(i, kLen);
    callers[i] = std::move(f.owned);
    f.owned.clear();
    f.ref = callers[i].data();
    f.owner = &owners[i];
    p.a->enqueue(std::move(f));
  }
  // One gathered write of 3 frames (2,220 bytes); the stream takes 1,000.
  p.a->attach(p.streamA, true);
  CHECK(p.sinkA.transfersDone == static_cast<int>(kFrames));  // before the peer has read a byte
  CHECK_FALSE(p.a->idle());                                    // the copied rest is still to be written
  for (auto& c : callers) std::fill(c.begin(), c.end(), static_cast<unsigned char>(0xEE));
  p.b->attach(p.streamB, false);
  runUntil(io, [&] { return p.sinkB.frames.size() == kFrames && p.a->idle(); });
  checkInOrder(p.sinkB.frames, kFrames, [](std::uint32_t) { return kLen; });
  p.endHealthy();
}

// The rest of a gathered write past the copy limit is written later from the
// frames themselves; frames queued meanwhile grow the queue, which moves the
// frames' slots. Before 2026-12-06 the write read the headers from those
// slots: freed memory went on the wire (a peer's "bad magic", or EFAULT from
// sendmsg once the old slots were unmapped), found by a broadcast root
// running 64 MiB ahead of its peer.
TEST_CASE("frames queued while the rest of a large gathered write is written from the frames, growing the queue, "
          "arrive intact and in order",
          "[unit][link]") {
  boost::asio::io_context io;
  LinkedPair p(io, link::MemoryOptions{0, 1000, 17});  // 1,000 bytes in flight, then the writer waits
  constexpr std::size_t kLen = 2048;
  constexpr std::uint32_t kFirst = 64, kMore = 1000;
  p.a->attach(p.streamA, true);
  p.b->attach(p.streamB, false);
  // The first frame is written at once (its rest copied); the next 63 wait,
  // then go as one gathered write of ~130 KiB, past the copy limit.
  for (std::uint32_t i = 0; i < kFirst; ++i) p.a->enqueue(dataFrame(i, kLen));
  runUntil(io, [&] { return p.sinkB.frames.size() >= 2; });  // that write is under way
  REQUIRE(p.sinkB.frames.size() < kFirst);
  for (std::uint32_t i = kFirst; i < kFirst + kMore; ++i) p.a->enqueue(dataFrame(i, kLen));
  runUntil(io, [&] { return p.sinkB.frames.size() >= kFirst + kMore || !p.sinkB.downs.empty(); });
  REQUIRE(p.sinkB.downs.empty());
  checkInOrder(p.sinkB.frames, kFirst + kMore, [](std::uint32_t) { return kLen; });
  p.endHealthy();
}

TEST_CASE(
    "a link takes a frame at once only while nothing is queued or being written and the frame fits the copy "
    "limit; a frame it takes is off the caller's buffer when enqueue returns",
    "[unit][link]") {
  boost::asio::io_context io;
  LinkedPair p(io, link::MemoryOptions{0, 1000, 13});  // 1,000 bytes in flight, then the writer waits
  constexpr std::size_t kMost = link::LinkWriter::kCopyLimit - wire::kHeaderBytes;  // 64 KiB
  CHECK_FALSE(p.a->takesAtOnce(1));                                                 // dialing: queued until attached
  p.a->attach(p.streamA, true);
  CHECK(p.a->takesAtOnce(0));
  CHECK(p.a->takesAtOnce(kMost));
  CHECK_FALSE(p.a->takesAtOnce(kMost + 1));  // its unwritten rest would stay on the caller's buffer

  auto f = dataFrame(0, kMost);
  std::vector<unsigned char> caller = std::move(f.owned);
  f.owned.clear();
  f.ref = caller.data();
  TestOwner owner;
  f.owner = &owner;
  p.a->enqueue(std::move(f));
  CHECK(p.sinkA.transfersDone == 1);  // the stream took 1,000 bytes, the rest was copied
  std::fill(caller.begin(), caller.end(), static_cast<unsigned char>(0xEE));
  CHECK_FALSE(p.a->takesAtOnce(1));  // the copied rest is being written
  p.b->attach(p.streamB, false);
  runUntil(io, [&] { return p.sinkB.frames.size() == 1 && p.a->idle(); });
  checkInOrder(p.sinkB.frames, 1, [](std::uint32_t) { return kMost; });
  CHECK(p.a->takesAtOnce(kMost));  // idle again
  p.endHealthy();
}

TEST_CASE("the frame reader lands a small payload through its read-ahead and a large one straight in its destination",
          "[unit][link]") {
  // The bytes of two frames, as a stream would deliver them.
  std::vector<unsigned char> wireBytes;
  for (auto [tag, len] : {std::pair<std::uint32_t, std::size_t>{1, 100}, {2, 200000}}) {
    auto f = dataFrame(tag, len);
    wireBytes.insert(wireBytes.end(), f.header.begin(), f.header.end());
    wireBytes.insert(wireBytes.end(), f.owned.begin(), f.owned.end());
  }
  link::FrameReader reader(1ULL << 30);
  std::size_t at = 0;
  int directReads = 0;
  auto readSome = [&] {  // what a stream gives: at most 4,000 bytes a read
    auto buf = reader.readBuffer();
    if (reader.readingDirect()) ++directReads;
    std::size_t n = std::min({buf.size(), wireBytes.size() - at, std::size_t{4000}});
    REQUIRE(n > 0);
    std::memcpy(buf.data(), wireBytes.data() + at, n);
    at += n;
    reader.arrived(n);
  };
  std::vector<std::vector<unsigned char>> dst;
  std::vector<std::uint32_t> tags;
  while (tags.size() < 2) {
    auto s = reader.step();
    REQUIRE(s != link::FrameReader::Step::Bad);
    if (s == link::FrameReader::Step::More) {
      readSome();
    } else if (s == link::FrameReader::Step::Header) {
      CHECK(reader.midFrame());
      dst.emplace_back(reader.header().length);
      reader.expect(dst.back().data());
    } else {
      tags.push_back(reader.header().tag);
      CHECK_FALSE(reader.midFrame());
    }
  }
  CHECK(tags == std::vector<std::uint32_t>{1, 2});
  CHECK(at == wireBytes.size());
  CHECK(directReads >= 30);  // most of the large payload went straight to its destination
  for (std::size_t k = 0; k < dst.size(); ++k) {
    bool same = true;
    for (std::size_t i = 0; i < dst[k].size(); ++i) same = same && dst[k][i] == static_cast<unsigned char>((k + 1 + i) % 251);
    CHECK(same);
  }
}

TEST_CASE("a frame of the default eager size arrives in one read that leaves room, once the read-ahead has grown",
          "[unit][link]") {
  // A peer's 64 KiB frame (an all-gather's result at 1,024 ranks of 64 B) is
  // all in the socket when the read comes: it must take one read, and one
  // shorter than the buffer, for Asio reads again at once after a read that
  // filled its buffer. With a 64 KiB read-ahead it took two (the payload's
  // last 40 bytes), and at times a wait in epoll_wait between them.
  link::FrameReader reader(1ULL << 30);
  constexpr std::size_t kPayload = 64 * 1024;
  std::vector<unsigned char> dst(kPayload);
  std::vector<int> readsPerFrame;
  bool roomLeft = true;
  for (std::uint32_t tag = 0; tag < 12; ++tag) {
    auto f = dataFrame(tag, kPayload);
    std::vector<unsigned char> wireBytes(f.header.begin(), f.header.end());
    wireBytes.insert(wireBytes.end(), f.owned.begin(), f.owned.end());
    std::size_t at = 0;
    int reads = 0;
    for (bool done = false; !done;) {
      switch (reader.step()) {
        case link::FrameReader::Step::More: {  // a stream gives all it has, up to the buffer
          auto buf = reader.readBuffer();
          const std::size_t n = std::min(buf.size(), wireBytes.size() - at);
          REQUIRE(n > 0);
          if (tag >= 8 && n == buf.size()) roomLeft = false;
          std::memcpy(buf.data(), wireBytes.data() + at, n);
          at += n;
          reader.arrived(n);
          ++reads;
          break;
        }
        case link::FrameReader::Step::Header:
          reader.expect(dst.data());
          break;
        case link::FrameReader::Step::Payload:
          done = true;
          break;
        case link::FrameReader::Step::Bad:
          FAIL(reader.why());
      }
    }
    CHECK(dst == f.owned);
    readsPerFrame.push_back(reads);
  }
  // The read-ahead starts at 1 KiB and doubles while reads fill it.
  CHECK(std::vector<int>(readsPerFrame.begin() + 8, readsPerFrame.end()) == std::vector<int>(4, 1));
  CHECK(roomLeft);
}

TEST_CASE("the frame reader reports a header with a wrong magic as bad, with the reason", "[unit][link]") {
  link::FrameReader reader(1ULL << 30);
  auto buf = reader.readBuffer();
  std::vector<unsigned char> junk(wire::kHeaderBytes, 0x5A);
  std::memcpy(buf.data(), junk.data(), junk.size());
  reader.arrived(junk.size());
  CHECK(reader.step() == link::FrameReader::Step::Bad);
  CHECK_FALSE(reader.why().empty());
}

TEST_CASE("a goodbye and its acknowledgement close both links cleanly after the frames queued before it",
          "[unit][link]") {
  boost::asio::io_context io;
  LinkedPair p(io, link::MemoryOptions{3, 0, 5});
  p.attach();
  for (std::uint32_t i = 0; i < 20; ++i) p.a->enqueue(dataFrame(i, 10));
  p.a->sendGoodbye(wire::GoodbyeMode::Final);
  CHECK(p.a->state() == Link::State::Closing);
  CHECK_THROWS_AS(p.a->enqueue(dataFrame(99, 1)), std::logic_error);  // R1: nothing after the goodbye
  runUntil(io, [&] { return !p.sinkA.downs.empty() && !p.sinkB.downs.empty(); });
  checkInOrder(p.sinkB.frames, 20, [](std::uint32_t) { return std::size_t{10}; });
  CHECK(p.sinkB.goodbyes == std::vector<wire::GoodbyeMode>{wire::GoodbyeMode::Final});
  CHECK(p.sinkA.downs == std::vector<std::string>{"closed after goodbye"});
  CHECK(p.sinkB.downs == std::vector<std::string>{"closed after goodbye"});
  CHECK(p.a->state() == Link::State::Closed);
  CHECK(p.b->state() == Link::State::Closed);
  CHECK(p.a->ackRead());
  CHECK(p.a->closedAfterGoodbye());
  CHECK(p.b->closedAfterGoodbye());
}

TEST_CASE("a peer that closes in the middle of a frame is reported as a lost link, not as a frame", "[unit][link]") {
  for (std::size_t cut : {std::size_t{7}, wire::kHeaderBytes + 10}) {
    INFO("the peer closes after " << cut << " bytes of a frame with 100 payload bytes");
    boost::asio::io_context io;
    FakeSink sink;
    auto [raw, end] = link::memoryPair(io, link::MemoryOptions{5, 0, 9});
    auto l = std::make_shared<Link>(io, sink, 0, 0, link::LinkLimits{1ULL << 30, 1});
    l->attach(end, false);
    auto f = dataFrame(3, 100);
    std::vector<unsigned char> bytes(f.header.begin(), f.header.end());
    bytes.insert(bytes.end(), f.owned.begin(), f.owned.end());
    boost::system::error_code ec;
    std::array<boost::asio::const_buffer, 1> buf{boost::asio::buffer(bytes.data(), cut)};
    REQUIRE(raw->writeSomeNow(buf, ec) == cut);
    raw->close();
    runUntil(io, [&] { return !sink.downs.empty(); });
    CHECK(sink.frames.empty());
    CHECK(sink.headers == (cut > wire::kHeaderBytes ? 1 : 0));
    CHECK(sink.downs == std::vector<std::string>{"connection closed by peer (EOF)"});
    CHECK_FALSE(sink.graceful);
    CHECK(l->state() == Link::State::Closed);
    CHECK_FALSE(l->closedAfterGoodbye());
  }
}

TEST_CASE("the connector's handshake over in-memory streams admits the right secret and refuses a wrong one",
          "[unit][link]") {
  boost::asio::io_context io;
  link::MemoryNetwork net(io, link::MemoryOptions{7, 0, 3});
  FakeAdmission root, member, stranger;
  link::Connector c0(io, connectorConfig(0, 0x11), root, std::make_unique<link::MemoryNetwork>(net));
  link::Connector c1(io, connectorConfig(1, 0x11), member, std::make_unique<link::MemoryNetwork>(net));
  link::Connector c2(io, connectorConfig(1, 0x22), stranger, std::make_unique<link::MemoryNetwork>(net));
  auto listener = net.listen("rank0");
  CHECK(listener->address().kind == "mem");
  c0.listen(listener);
  const link::DialPolicy policy{link::Clock::now() + std::chrono::seconds(10), false};

  SECTION("the right secret is welcomed and both sides get the stream") {
    c1.dial(0, 0, link::Endpoint{"mem", "rank0"}, policy);
    runUntil(io, [&] { return !root.streams.empty() && !member.streams.empty(); });
    CHECK(root.streams[0].peer == 1);
    CHECK_FALSE(root.streams[0].dialedByUs);
    CHECK(member.streams[0].peer == 0);
    CHECK(member.streams[0].dialedByUs);
    CHECK(root.refusals.empty());
    CHECK(member.failures.empty());
    // The streams carry frames after the handshake.
    FakeSink sinkRoot, sinkMember;
    auto l0 = std::make_shared<Link>(io, sinkRoot, 1, 0, link::LinkLimits{1ULL << 30, 0});
    auto l1 = std::make_shared<Link>(io, sinkMember, 0, 0, link::LinkLimits{1ULL << 30, 1});
    l0->attach(root.streams[0].stream, false);
    l1->attach(member.streams[0].stream, true);
    l1->enqueue(dataFrame(0, 33));
    runUntil(io, [&] { return sinkRoot.frames.size() == 1; });
    checkInOrder(sinkRoot.frames, 1, [](std::uint32_t) { return std::size_t{33}; });
    l0->fail("test over");
    l1->fail("test over");
  }

  SECTION("a wrong secret is refused, and the dialer is told why") {
    c2.dial(0, 0, link::Endpoint{"mem", "rank0"}, policy);
    runUntil(io, [&] { return !stranger.failures.empty() && !root.refusals.empty(); });
    CHECK(root.streams.empty());
    CHECK(stranger.streams.empty());
    CHECK(root.refusals[0].code == wire::RejectCode::BadProof);
    CHECK(root.refusals[0].claimedRank == 1);
    const auto& f = stranger.failures[0];
    CHECK(f.refused);
    CHECK(f.attempts == 1);
    CHECK_THAT(f.reason, Catch::Contains("cannot connect to rank 0 at rank0: rejected our proof of the secret"));
  }

  SECTION("a dial to a name nobody listens on fails as refused") {
    c1.dial(0, 0, link::Endpoint{"mem", "nobody"}, policy);
    runUntil(io, [&] { return !member.failures.empty(); });
    CHECK_FALSE(member.failures[0].retriesExhausted);
    CHECK_THAT(member.failures[0].reason, Catch::Contains("cannot connect to rank 0 at nobody"));
  }
  listener->close();
}

TEST_CASE("the frame queue keeps its order through wrap-around, growth and erasure, and releases a popped payload",
          "[unit][link]") {
  link::FrameQueue q;
  auto frame = [](std::size_t n) {
    link::OutFrame f;
    f.len = n;
    return f;
  };
  std::size_t next = 0, first = 0;  // frames first..next-1 are queued, len = their number
  for (int round = 0; round < 50; ++round) {  // the head walks around the ring many times
    for (int i = 0; i < 7; ++i) q.push_back(frame(next++));
    for (int i = 0; i < 5; ++i, ++first) {
      REQUIRE(q.front().len == first);
      q.pop_front();
    }
  }
  REQUIRE(q.size() == next - first);
  for (std::size_t i = 0; i < q.size(); ++i) REQUIRE(q[i].len == first + i);
  // Erase the odd ones behind the first two; the rest keep their order.
  q.eraseFrom(2, [](const link::OutFrame& f) { return f.len % 2 == 1; });
  std::vector<std::size_t> left;
  for (std::size_t i = 0; i < q.size(); ++i) left.push_back(q[i].len);
  std::vector<std::size_t> expected{first, first + 1};
  for (std::size_t v = first + 2; v < next; ++v)
    if (v % 2 == 0) expected.push_back(v);
  CHECK(left == expected);
  // A written frame's shared payload is released when it leaves the queue.
  auto payload = std::make_shared<const wire::Bytes>(wire::Bytes(8, 1));
  q.clear();
  link::OutFrame shared;
  shared.shared = payload;
  q.push_back(std::move(shared));
  CHECK(payload.use_count() == 2);
  q.pop_front();
  CHECK(payload.use_count() == 1);
  CHECK(q.empty());
}
