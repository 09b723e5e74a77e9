// Fakes and helpers shared by the link and connector unit tests (in-memory
// streams, one io_context, one thread): a link sink that records what it is
// told, an admission that welcomes (or holds hellos until the test releases
// them), and a loop that runs handlers until a condition holds.
#pragma once

#include <catch2/catch.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "link/connector.hpp"
#include "link/link.hpp"

namespace tether::testsupport {

using link::Link;

struct Frame {
  wire::FrameHeader header;
  std::vector<unsigned char> payload;
};

// Stashes every data frame and records what the link reports.
struct FakeSink final : link::LinkSink {
  std::vector<Frame> frames;
  int headers = 0;
  std::vector<wire::GoodbyeMode> goodbyes;
  std::vector<std::string> downs;
  bool graceful = false;
  int transfersDone = 0;

  link::Target onDataHeader(Link&, const wire::FrameHeader&, bool) override {
    ++headers;
    return link::Target{link::Target::Where::Stash, nullptr, nullptr};
  }
  void onDataComplete(Link&, const wire::FrameHeader& h, const link::Target&,
                      std::vector<unsigned char>&& stashed) override {
    if (!failOnData.empty()) throw std::runtime_error(failOnData);
    frames.push_back({h, std::move(stashed)});
  }
  std::string failOnData;  // set: a data frame's delivery throws it
  void onControlFrame(Link&, const wire::FrameHeader& h, std::vector<unsigned char>&& payload) override {
    frames.push_back({h, std::move(payload)});
  }
  void onGoodbye(Link&, wire::GoodbyeMode mode) override { goodbyes.push_back(mode); }
  void onLinkDown(Link&, const std::string& reason, bool wasGraceful) override {
    downs.push_back(reason);
    graceful = wasGraceful;
  }
  void onTransferDone(link::Owner&, bool) override { ++transfersDone; }
  void onLinkIdle(Link&) override {}
};

// Welcomes every authenticated hello and records the outcome. With `holding`
// it answers Wait instead (R4: the peer's previous connection lingers), and
// each wait for the predecessor lasts until its deadline or release().
struct FakeAdmission final : link::Admission {
  struct Connected {
    int peer;
    std::shared_ptr<link::Stream> stream;
    bool dialedByUs;
  };
  std::vector<Connected> streams;
  std::vector<link::ConnectFailure> failures;
  std::vector<link::Refusal> refusals;
  bool holding = false;
  int waits = 0;  // Wait verdicts given
  std::vector<std::shared_ptr<boost::asio::steady_timer>> holds;

  std::optional<link::Verdict> verdict;  // set: every hello gets it

  link::Verdict admit(int, std::uint32_t, const std::string&) override {
    if (verdict) return *verdict;
    if (!holding) return link::Verdict::welcome();
    ++waits;
    return link::Verdict::wait();
  }
  boost::asio::awaitable<void> predecessorClosed(int, link::Clock::time_point deadline) override {
    auto timer = std::make_shared<boost::asio::steady_timer>(co_await boost::asio::this_coro::executor, deadline);
    holds.push_back(timer);
    boost::system::error_code ignored;
    co_await timer->async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ignored));
  }
  // The predecessor has closed: held hellos proceed, new ones are welcomed.
  void release() {
    holding = false;
    for (auto& t : holds) t->cancel();
    holds.clear();
  }
  void connected(int peer, std::uint32_t, std::shared_ptr<link::Stream> stream, bool dialedByUs) override {
    streams.push_back({peer, std::move(stream), dialedByUs});
  }
  void connectFailed(int, std::uint32_t, const link::ConnectFailure& f) override { failures.push_back(f); }
  void refused(const link::Refusal& r) override { refusals.push_back(r); }
  bool closing() const override { return false; }
  bool mayRetry() const override { return true; }
  bool stillDialing(int, std::uint32_t) const override { return true; }
};

// Runs handlers until `done` holds (or 20 s pass, a failure).
inline void runUntil(boost::asio::io_context& io, const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    io.restart();
    io.run_one_for(std::chrono::milliseconds(50));
  }
  REQUIRE(done());
}

// A point-to-point frame with tag `i` and `len` bytes (i + k) % 251.
inline link::OutFrame dataFrame(std::uint32_t i, std::size_t len) {
  link::OutFrame f;
  wire::FrameHeader h;
  h.kind = wire::Kind::P2P;
  h.comm = 1;
  h.coll = i;
  h.tag = i;
  h.length = len;
  wire::encodeHeader(h, f.header.data());
  f.owned.resize(len);
  for (std::size_t k = 0; k < len; ++k) f.owned[k] = static_cast<unsigned char>((i + k) % 251);
  f.len = len;
  return f;
}

// The frames arrived in order, tags 0..n-1, each with the bytes dataFrame() wrote.
inline void checkInOrder(const std::vector<Frame>& frames, std::size_t n,
                         const std::function<std::size_t(std::uint32_t)>& len) {
  REQUIRE(frames.size() == n);
  for (std::uint32_t i = 0; i < n; ++i) {
    INFO("frame " << i);
    REQUIRE(frames[i].header.tag == i);
    REQUIRE(frames[i].payload.size() == len(i));
    bool same = true;
    for (std::size_t k = 0; k < frames[i].payload.size(); ++k)
      same = same && frames[i].payload[k] == static_cast<unsigned char>((i + k) % 251);
    CHECK(same);
  }
}

// Rank `rank` of a world of 2 whose secret is 16 bytes `secretByte`.
inline link::ConnectorConfig connectorConfig(int rank, unsigned char secretByte) {
  link::ConnectorConfig c;
  c.rank = rank;
  c.nranks = 2;
  c.secret.fill(secretByte);
  c.worldId = 77;
  c.handshakeTimeout = std::chrono::milliseconds(10000);
  return c;
}

}  // namespace tether::testsupport
