// DeadlineQueue (tether/detail/core/deadline_queue.hpp): the requests'
// deadlines in both worlds, in order, left when a call ends or goes.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <vector>

#include "tether/detail/core/deadline_queue.hpp"

namespace {

using tether::detail::core::DeadlineHook;
using tether::detail::core::DeadlineQueue;
using Clock = std::chrono::steady_clock;

struct Call {
  explicit Call(int id) : id(id) {}
  int id;
  DeadlineHook<Call> hook;
};
using Queue = DeadlineQueue<Call, &Call::hook>;

Clock::time_point at(int ms) { return Clock::time_point{} + std::chrono::milliseconds(ms); }

std::vector<int> expireAll(Queue& q, int ms) {
  std::vector<int> ids;
  q.expire(at(ms), [&](Call& c) { ids.push_back(c.id); });
  return ids;
}

}  // namespace

TEST_CASE("calls expire in deadline order whatever order they were added in", "[unit][core]") {
  Queue q;
  Call a{1}, b{2}, c{3}, d{4};
  CHECK(q.earliest() == Clock::time_point::max());
  CHECK(q.add(a, at(30)));  // the first is the earliest
  CHECK(q.add(b, at(10)));  // earlier: the timer is to be set again
  CHECK_FALSE(q.add(c, at(20)));
  CHECK_FALSE(q.add(d, at(30)));  // a tie goes after the one added first
  CHECK(q.earliest() == at(10));
  CHECK(expireAll(q, 5).empty());
  CHECK(expireAll(q, 20) == std::vector<int>{2, 3});
  CHECK_FALSE(b.hook.linked());
  CHECK(a.hook.linked());
  CHECK(q.earliest() == at(30));
  CHECK(expireAll(q, 100) == std::vector<int>{1, 4});
  CHECK(q.empty());
}

TEST_CASE("a call that ends or goes leaves the deadline queue once", "[unit][core]") {
  Queue q;
  Call a{1}, c{3};
  auto b = std::make_unique<Call>(2);
  q.add(a, at(10));
  q.add(*b, at(20));
  q.add(c, at(30));
  Queue::remove(a);
  Queue::remove(a);  // not queued: nothing
  CHECK(q.earliest() == at(20));
  b.reset();  // its hook goes with it
  CHECK(q.earliest() == at(30));
  CHECK(expireAll(q, 100) == std::vector<int>{3});
}

TEST_CASE("a call expired may add another that expires in the same pass when it is due", "[unit][core]") {
  Queue q;
  Call a{1}, b{2}, c{3};
  q.add(a, at(10));
  q.add(c, at(50));
  std::vector<int> ids;
  q.expire(at(20), [&](Call& x) {
    ids.push_back(x.id);
    if (x.id == 1) {
      q.add(b, at(15));  // due already
      Queue::remove(c);  // and one ended meanwhile
    }
  });
  CHECK(ids == std::vector<int>{1, 2});
  CHECK(q.empty());
  q.add(a, at(5));  // a hook expired may be queued again
  CHECK(q.earliest() == at(5));
  q.add(c, at(1));
  q.add(c, at(9));  // queued already: it moves
  CHECK(expireAll(q, 100) == std::vector<int>{1, 3});
  q.add(a, at(5));
  q.clear();
  CHECK_FALSE(a.hook.linked());
}
