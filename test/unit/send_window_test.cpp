// The send windows (tether/detail/core/send_windows.hpp, both worlds'): what may go, what waits, in which
// order it goes when credit comes, when the receiving side returns credit,
// and the lanes (a peer; a peer and a communicator) that keep apart.
#include <catch2/catch.hpp>

#include "core/send_window.hpp"

using tether::SendWindow;

namespace {

tether::link::OutFrame frame(std::size_t len, const tether::link::Owner* owner) {
  tether::link::OutFrame f;
  f.len = len;
  f.owner = const_cast<tether::link::Owner*>(owner);
  return f;
}

struct Owner : tether::link::Owner {};

SendWindow window(std::uint64_t bytes, std::uint64_t batch = tether::detail::core::window::kCreditBatch) {
  return SendWindow(bytes, batch, [](const tether::link::OutFrame& f) -> std::uint64_t { return f.len; });
}
// The frames credit releases, in order.
std::vector<tether::link::OutFrame> credit(SendWindow& w, tether::Lane lane, std::uint64_t bytes) {
  std::vector<tether::link::OutFrame> ready;
  w.credit(lane, bytes, [&](tether::link::OutFrame&& f) { ready.push_back(std::move(f)); });
  return ready;
}

}  // namespace

TEST_CASE("send window: messages past the window wait, in order, until credit comes", "[unit][window]") {
  SendWindow w = window(64 * 1024);
  const std::uint64_t cost = SendWindow::cost(8);  // 136
  int sent = 0;
  while (w.admit(1, 8)) ++sent;
  CHECK(sent == static_cast<int>(64 * 1024 / cost));
  CHECK(w.unreceived(1) == sent * cost);
  CHECK(w.admit(2, 8));  // another peer has its own window
  Owner a, b;
  w.hold(1, frame(8, &a));
  w.hold(1, frame(8, &b));
  REQUIRE(w.heldFor(&a));
  CHECK(w.heldFor(&a)->peer == 1);
  CHECK_FALSE(w.admit(1, 0));  // behind the waiting ones, even if it would fit
  auto ready = credit(w, 1, cost);  // room for one
  REQUIRE(ready.size() == 1);
  CHECK(ready[0].owner == &a);
  CHECK_FALSE(w.heldFor(&a));
  CHECK(w.drop(&b) == 1);
  CHECK(w.ownersHeld().empty());
}

TEST_CASE("send window: a message larger than the window goes while less than a quarter is outstanding",
          "[unit][window]") {
  SendWindow w = window(64 * 1024);
  CHECK(w.admit(1, 1 << 20));
  CHECK_FALSE(w.admit(1, 8));
  CHECK(credit(w, 1, SendWindow::cost(1 << 20)).empty());
  // The receiver keeps up to kCreditBatch before it returns it: that much
  // outstanding must not stop a large message.
  REQUIRE(w.admit(1, 100));
  CHECK(w.admit(1, 1 << 20));
}

TEST_CASE("send window: the receiver returns credit in batches of kCreditBatch", "[unit][window]") {
  SendWindow w = window(1 << 20);
  std::uint64_t owed = 0, returned = 0;
  for (int i = 0; i < 1000; ++i) {
    owed += SendWindow::cost(8);
    returned += w.received(3, 8);
    CHECK(owed - returned < tether::detail::core::window::kCreditBatch);
  }
  CHECK(returned > 0);
}

TEST_CASE("send window: each communicator's collective frames to a peer have their own lane, which ends with it",
          "[unit][window]") {
  SendWindow w = window(tether::detail::core::window::kCollectiveBytes, tether::detail::core::window::kCollectiveBatch);
  CHECK(w.bytes() == 4u << 20);
  const tether::Lane world(1, 7), child(1, 8);
  while (w.admit(world, 16 * 1024)) {
  }
  CHECK(w.unreceived(world) > 4u << 19);
  Owner a, b;
  w.hold(world, frame(16 * 1024, &a));
  CHECK(w.admit(child, 16 * 1024));     // not behind the world's waiting frame
  w.hold(child, frame(16 * 1024, &b));  // (held only to see whose it is)
  REQUIRE(w.heldFor(&a));
  CHECK(w.heldFor(&a)->comm == 7);
  CHECK(w.heldFor(&b)->comm == 8);
  CHECK(w.ownersHeldFor(1).size() == 2);
  // Credit for one lane releases that lane's frames only.
  auto ready = credit(w, world, w.unreceived(world));
  REQUIRE(ready.size() == 1);
  CHECK(ready[0].owner == &a);
  // The receiving side's batch is a quarter window: one credit per MiB.
  std::uint64_t returned = 0;
  for (int i = 0; i < 64; ++i) returned += w.received(tether::Lane(2, 7), 16 * 1024 - SendWindow::kMessageCost);
  CHECK(returned == tether::detail::core::window::kCollectiveBatch);
  // A communicator that ended takes its lanes along, but not one a frame still waits on.
  w.forgetComm(7);
  CHECK(w.unreceived(world) == 0);
  w.forgetComm(8);
  CHECK(w.heldFor(&b));
  CHECK(w.drop(&b) == 1);
  w.forgetComm(8);
  CHECK(w.ownersHeld().empty());
}
