// tether/detail/core/deadline_queue.hpp — the calls that fail at their
// deadline whether or not anybody waits for them (a request's,
// tether/request.hpp), in deadline order, the same in every world: each call
// holds its place (a DeadlineHook), joins when it starts and leaves when it
// ends (or when its hook goes), so a steady-state request allocates nothing;
// the world sets its one timer for the earliest (as libuv keeps its timers) —
// lib/core's RequestDeadlines an Asio timer, the testing world its timer
// thread. No clock read and no I/O: times come in, the expired calls come
// out. Not thread-safe: each world calls it where it owns the calls (the
// progress thread; under the world mutex). Written here rather than with
// Boost.Intrusive (which lib/core used before) because the testing world's
// headers stay Boost-free. Header-only, C++17.
#pragma once

#include <chrono>

namespace tether {
namespace detail {
namespace core {

// A call's place in a DeadlineQueue: a node of its circular list. A hook
// that goes while queued leaves the queue.
template <class Item>
struct DeadlineHook {
  DeadlineHook() = default;
  DeadlineHook(const DeadlineHook&) = delete;
  DeadlineHook& operator=(const DeadlineHook&) = delete;
  ~DeadlineHook() { unlink(); }

  bool linked() const { return next != nullptr; }
  void unlink() {
    if (!next) return;
    prev->next = next;
    next->prev = prev;
    prev = next = nullptr;
  }

  std::chrono::steady_clock::time_point at{};
  DeadlineHook* prev = nullptr;
  DeadlineHook* next = nullptr;
  Item* item = nullptr;
};

// `hook`: where an Item holds its place.
template <class Item, DeadlineHook<Item> Item::*hook>
class DeadlineQueue {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  DeadlineQueue() { head_.prev = head_.next = &head_; }
  ~DeadlineQueue() { clear(); }
  DeadlineQueue(const DeadlineQueue&) = delete;
  DeadlineQueue& operator=(const DeadlineQueue&) = delete;

  // `item` is due at `at` (queued already: it moves); true if it is now the
  // earliest (the world's timer is to be set for it). Its place is looked
  // for from the latest: the deadlines of one timeout come in order.
  bool add(Item& item, TimePoint at) {
    DeadlineHook<Item>& h = item.*hook;
    h.unlink();
    h.at = at;
    h.item = &item;
    DeadlineHook<Item>* before = head_.prev;
    while (before != &head_ && before->at > at) before = before->prev;
    h.prev = before;
    h.next = before->next;
    before->next->prev = &h;
    before->next = &h;
    return head_.next == &h;
  }
  // `item` ended (nothing if it is in no queue).
  static void remove(Item& item) { (item.*hook).unlink(); }

  bool empty() const { return head_.next == &head_; }
  // The earliest deadline; max when none.
  TimePoint earliest() const { return empty() ? TimePoint::max() : head_.next->at; }
  // Takes out every item due at or before `now`, earliest first, and hands
  // it to `expired` (which may add and remove items).
  template <class Expired>
  void expire(TimePoint now, Expired&& expired) {
    while (!empty() && head_.next->at <= now) {
      Item& item = *head_.next->item;
      remove(item);
      expired(item);
    }
  }
  void clear() {
    while (!empty()) head_.next->unlink();
  }

 private:
  DeadlineHook<Item> head_;  // the list's sentinel: head_.next the earliest
};

}  // namespace core
}  // namespace detail
}  // namespace tether
