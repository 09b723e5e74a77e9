// tether/detail/match/mailbox.hpp — matching under the full key, written
// once for every world: receives posted before their message arrives, and
// messages that arrived before their receive was posted ("unexpected"),
// both kept per key, first in, first out. A receive is satisfied only by a
// message whose key is equal in every field, never by (peer, tag) alone.
// Both worlds (tether/detail/core/frame_calls.hpp) instantiate it with the
// frame key (key.hpp), a posted receive and a frame kept with its header;
// `Posted` has a member `owner` (the operation waiting on it), and the key a
// stashedOnce(key) found by argument-dependent lookup. No locks: each world
// guards it its own way.
// Steady state allocates nothing: a key's queue keeps its memory, and the
// map node of a key whose queue emptied is kept for the next key.
// Header-only, C++17.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tether {
namespace detail {
namespace match {

// A first-in first-out queue that keeps its memory when it empties.
template <class T>
class Fifo {
 public:
  using iterator = typename std::vector<T>::iterator;
  using const_iterator = typename std::vector<T>::const_iterator;

  bool empty() const { return head_ == items_.size(); }
  std::size_t size() const { return items_.size() - head_; }
  void push_back(T t) { items_.push_back(std::move(t)); }
  T takeFront() {
    T front = std::move(items_[head_]);
    if (++head_ == items_.size()) clear();
    return front;
  }
  iterator begin() { return items_.begin() + static_cast<std::ptrdiff_t>(head_); }
  iterator end() { return items_.end(); }
  const_iterator begin() const { return items_.begin() + static_cast<std::ptrdiff_t>(head_); }
  const_iterator end() const { return items_.end(); }
  void erase(iterator pos) {
    items_.erase(pos);
    if (empty()) clear();
  }
  void clear() {
    items_.clear();
    head_ = 0;
  }

 private:
  std::vector<T> items_;
  std::size_t head_ = 0;
};

// A receive waiting in the mailbox: the caller's buffer and its call.
struct PostedReceive {
  void* buf = nullptr;
  std::size_t len = 0;
  const void* owner = nullptr;  // the call waiting on it
};

// A frame that came before its receive: its header and payload.
template <class Header>
struct StashedFrame {
  Header header;
  std::vector<unsigned char> payload;
};

template <class Key, class Hash, class Posted, class Stashed>
class Mailbox {
 public:
  void post(const Key& k, Posted p) {
    queueFor(posted_, freePosted_, k).push_back(std::move(p));
    ++postedCount_;
  }

  // The oldest receive posted under k.
  std::optional<Posted> claimPosted(const Key& k) { return popFront(posted_, freePosted_, k, postedCount_); }

  // Withdraws `owner`'s receive under k; false if none.
  bool unpost(const Key& k, const void* owner) {
    auto it = posted_.find(k);
    if (it == posted_.end()) return false;
    auto& q = it->second;
    auto pos = std::find_if(q.begin(), q.end(), [&](const Posted& p) { return p.owner == owner; });
    if (pos == q.end()) return false;
    q.erase(pos);
    if (q.empty()) release(posted_, freePosted_, it);
    --postedCount_;
    return true;
  }

  // Keeps an unexpected message. When its key is one a mailbox keeps once
  // (stashedOnce(k), key.hpp: a collective's frame, whose key names one step
  // of one call), returns false and keeps nothing if one with this exact key
  // is already waiting: a duplicate.
  bool stash(const Key& k, Stashed f) {
    auto it = stashed_.find(k);
    if (stashedOnce(k) && it != stashed_.end() && !it->second.empty()) return false;
    (it != stashed_.end() ? it->second : queueFor(stashed_, freeStashed_, k)).push_back(std::move(f));
    ++stashedCount_;
    return true;
  }

  // The oldest message waiting under k.
  std::optional<Stashed> takeStashed(const Key& k) { return popFront(stashed_, freeStashed_, k, stashedCount_); }

  bool hasStashed(const Key& k) const { return stashed_.find(k) != stashed_.end(); }

  // Visits every waiting message (for diagnosing mismatched operations).
  template <class F>
  void forEachStashed(F&& f) const {
    for (const auto& entry : stashed_)
      for (const auto& s : entry.second) f(entry.first, s);
  }

  // Drops every waiting message for which pred(key) holds; returns how many.
  template <class Pred>
  std::size_t dropStashed(Pred&& pred) {
    std::size_t n = 0;
    for (auto it = stashed_.begin(); it != stashed_.end();) {
      if (pred(it->first)) {
        n += it->second.size();
        stashedCount_ -= it->second.size();
        it->second.clear();
        it = release(stashed_, freeStashed_, it);
      } else {
        ++it;
      }
    }
    return n;
  }

  std::size_t postedCount() const { return postedCount_; }
  std::size_t stashedCount() const { return stashedCount_; }

 private:
  template <class T>
  using Queues = std::unordered_map<Key, Fifo<T>, Hash>;
  template <class T>
  using Pool = std::vector<typename Queues<T>::node_type>;
  // Emptied keys' nodes kept for reuse, at most this many per map.
  static constexpr std::size_t kPooled = 64;

  // k's queue, made from a pooled node if it has none.
  template <class T>
  static Fifo<T>& queueFor(Queues<T>& queues, Pool<T>& pool, const Key& k) {
    auto it = queues.find(k);
    if (it != queues.end()) return it->second;
    if (pool.empty()) return queues[k];
    auto node = std::move(pool.back());
    pool.pop_back();
    node.key() = k;
    return queues.insert(std::move(node)).position->second;
  }

  // Removes an emptied key, keeping its node (and its queue's memory).
  template <class T>
  static typename Queues<T>::iterator release(Queues<T>& queues, Pool<T>& pool, typename Queues<T>::iterator it) {
    if (pool.size() >= kPooled) return queues.erase(it);
    auto next = std::next(it);
    if (pool.capacity() == 0) pool.reserve(kPooled);
    pool.push_back(queues.extract(it));
    return next;
  }

  // The oldest entry of `queues` under k, removed.
  template <class T>
  static std::optional<T> popFront(Queues<T>& queues, Pool<T>& pool, const Key& k, std::size_t& count) {
    auto it = queues.find(k);
    if (it == queues.end()) return std::nullopt;
    std::optional<T> front(it->second.takeFront());
    if (it->second.empty()) release(queues, pool, it);
    --count;
    return front;
  }

  Queues<Posted> posted_;
  Queues<Stashed> stashed_;
  Pool<Posted> freePosted_;
  Pool<Stashed> freeStashed_;
  std::size_t postedCount_ = 0;
  std::size_t stashedCount_ = 0;
};

}  // namespace match
}  // namespace detail
}  // namespace tether
