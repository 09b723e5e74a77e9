// The abort relay over a simulated set of open links: who gets the notice,
// how a lost tree target is routed around, and which failures start an abort.
#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <vector>

#include "core/abort_relay.hpp"

using namespace tether;

namespace {

// Open links to some peers; sends are recorded, not written.
struct FakeLinks final : NoticeLinks {
  std::set<int> open, gone;
  std::vector<int> sentOpen, dialled;
  std::vector<int> openPeers() const override { return {open.begin(), open.end()}; }
  void sendOpen(int peer, const std::vector<unsigned char>&) override { sentOpen.push_back(peer); }
  void sendDialling(int peer, const std::vector<unsigned char>&) override { dialled.push_back(peer); }
  bool departed(int peer) const override { return gone.count(peer) > 0; }
};

wire::AbortNotice notice(int origin, std::uint32_t lost = wire::kNoRank) {
  return {static_cast<std::uint32_t>(origin), "test reason", lost};
}

}  // namespace

TEST_CASE("An abort notice goes over every open link but to its origin and sender, then down the tree",
          "[unit][core]") {
  // Rank 8 of 100 hears rank 40's abort from rank 1; links are open to 1, 3, 40 and 70.
  FakeLinks links;
  links.open = {1, 3, 40, 70};
  AbortChannel channel(8, 100);
  AbortRelay relay(8, 100, channel, links);
  REQUIRE(relay.handle(notice(40), true, 1, /*joined=*/true));
  CHECK(links.sentOpen == std::vector<int>{3, 70});
  // Rank 8's children in the radix-8 tree rooted at 0: 9 .. 15.
  CHECK(links.dialled == std::vector<int>{9, 10, 11, 12, 13, 14, 15});
  CHECK(channel.sentTo(40));
  CHECK(channel.sentTo(1));
  // A second notice is not forwarded: each rank sends once.
  links.sentOpen.clear();
  links.dialled.clear();
  CHECK_FALSE(relay.handle(notice(5), true, 5, true));
  CHECK(links.sentOpen.empty());
  CHECK(links.dialled.empty());
}

TEST_CASE("Before the rendezvous ends an abort notice goes over the open links only", "[unit][core]") {
  FakeLinks links;
  links.open = {0, 2};
  AbortChannel channel(1, 16);
  AbortRelay relay(1, 16, channel, links);
  REQUIRE(relay.handle(notice(1), true, -1, /*joined=*/false));
  CHECK(links.sentOpen == std::vector<int>{0, 2});
  CHECK(links.dialled.empty());
}

TEST_CASE("A lost tree target's children get the notice from the rank that sent it", "[unit][core]") {
  // Rank 0 starts an abort in a world of 100: its tree children are 1 .. 7, 8, 16 .. 64 (radix 8).
  FakeLinks links;
  AbortChannel channel(0, 100);
  AbortRelay relay(0, 100, channel, links);
  REQUIRE(relay.handle(notice(0), true, -1, true));
  REQUIRE(std::find(links.dialled.begin(), links.dialled.end(), 8) != links.dialled.end());
  links.dialled.clear();
  links.gone = {8};  // its link broke after the notice was queued
  relay.peerGone(8);
  CHECK(links.dialled == std::vector<int>{9, 10, 11, 12, 13, 14, 15});
  // A rank the notice names as lost is routed around from the start.
  FakeLinks other;
  AbortChannel ch2(0, 100);
  AbortRelay r2(0, 100, ch2, other);
  REQUIRE(r2.handle(notice(0, 8), true, -1, true));
  CHECK(std::find(other.dialled.begin(), other.dialled.end(), 8) == other.dialled.end());
  CHECK(std::find(other.dialled.begin(), other.dialled.end(), 9) != other.dialled.end());
}

TEST_CASE("Only a lost peer, a protocol error or a timeout of a world collective starts an abort", "[unit][core]") {
  FakeLinks links;
  AbortChannel channel(2, 8);
  AbortRelay relay(2, 8, channel, links);
  auto of = [](ErrorCode c, int peer = -1) {
    return std::make_exception_ptr(Error(c, "rank 2: allgather#3: what happened", 2, peer));
  };
  auto lost = relay.afterFailedCollective(of(ErrorCode::PeerLost, 5));
  REQUIRE(lost);
  CHECK(lost->origin == 2);
  CHECK(lost->lost == 5);
  CHECK(lost->reason == "rank 2: allgather#3: what happened");
  CHECK(relay.afterFailedCollective(of(ErrorCode::Timeout)));
  CHECK(relay.afterFailedCollective(of(ErrorCode::Protocol))->lost == wire::kNoRank);
  CHECK_FALSE(relay.afterFailedCollective(of(ErrorCode::InvalidArgument)));
  CHECK_FALSE(relay.afterFailedCollective(of(ErrorCode::Aborted)));
  REQUIRE(relay.handle(notice(4), false, 4, true));
  CHECK_FALSE(relay.afterFailedCollective(of(ErrorCode::Timeout)));  // an abort is handled already
}
