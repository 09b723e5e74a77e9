// A world's named states: joining ends once; the drain ends when no link is
// open, goes on while links keep closing, and stops at its limit.
#include <catch2/catch.hpp>

#include "core/lifecycle.hpp"

using namespace tether;
using namespace std::chrono_literals;

TEST_CASE("A world joins once: the first result of the rendezvous counts", "[unit][core]") {
  Lifecycle life;
  CHECK(life.joining());
  CHECK(life.finishJoin(false));
  CHECK_FALSE(life.finishJoin(true));
  CHECK(life.join() == Lifecycle::Join::Failed);
  CHECK_FALSE(life.joined());
  CHECK_FALSE(life.closing());
}

TEST_CASE("A drain goes on while links keep closing, ends when none is open, and stops at its limit", "[unit][core]") {
  const auto t0 = Lifecycle::Clock::now();
  Lifecycle life;
  life.finishJoin(true);
  life.beginDrain(t0 + 10s);
  CHECK(life.close() == Lifecycle::Close::Draining);
  CHECK_FALSE(life.linksOpen(5));
  CHECK_FALSE(life.extend(t0 + 1s, 1s));  // nothing closed during the period: it ends

  Lifecycle busy;
  busy.beginDrain(t0 + 10s);
  CHECK_FALSE(busy.linksOpen(5));
  CHECK_FALSE(busy.linksOpen(3));         // two links closed
  CHECK(busy.extend(t0 + 1s, 1s));        // another period
  CHECK_FALSE(busy.extend(t0 + 2s, 1s));  // and none closed in that one
  CHECK_FALSE(busy.linksOpen(2));
  CHECK_FALSE(busy.extend(t0 + 9500ms, 1s));  // the limit is reached first
  CHECK(busy.linksOpen(0));
  CHECK(busy.drained());
  CHECK_FALSE(busy.extend(t0 + 3s, 1s));
}
