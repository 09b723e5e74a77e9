// tether/detail/match/mailbox.hpp — matching under the full key, written
// once for every world: receives posted before their message arrives, and
// messages that arrived before their receive was posted ("unexpected"),
// both kept per key, first in, first out. A receive is satisfied only by a
// message whose key is equal in every field, never by (peer, tag) alone.
// The TCP world (lib/match, keys from frame headers) and the in-process
// testing world (tether/testing/detail/) instantiate it with their own key,
// posted-receive and message types; `Posted` has a member `owner` (the
// operation waiting on it). No locks: each world guards it its own way.
// Header-only, C++17.
#pragma once

#include <algorithm>
#include <cstddef>
#include <deque>
#include <optional>
#include <unordered_map>
#include <utility>

namespace tether {
namespace detail {
namespace match {

template <class Key, class Hash, class Posted, class Stashed>
class Mailbox {
 public:
  void post(const Key& k, Posted p) {
    posted_[k].push_back(std::move(p));
    ++postedCount_;
  }

  // The oldest receive posted under k.
  std::optional<Posted> claimPosted(const Key& k) { return popFront(posted_, k, postedCount_); }

  // Withdraws `owner`'s receive under k; false if none.
  bool unpost(const Key& k, const void* owner) {
    auto it = posted_.find(k);
    if (it == posted_.end()) return false;
    auto& q = it->second;
    auto pos = std::find_if(q.begin(), q.end(), [&](const Posted& p) { return p.owner == owner; });
    if (pos == q.end()) return false;
    q.erase(pos);
    if (q.empty()) posted_.erase(it);
    --postedCount_;
    return true;
  }

  // Keeps an unexpected message. With `unique` (a collective's frame, whose
  // key names one step of one call), returns false and keeps nothing if one
  // with this exact key is already waiting: a duplicate.
  bool stash(const Key& k, Stashed f, bool unique) {
    auto& q = stashed_[k];
    if (unique && !q.empty()) return false;
    q.push_back(std::move(f));
    ++stashedCount_;
    return true;
  }

  // The oldest message waiting under k.
  std::optional<Stashed> takeStashed(const Key& k) { return popFront(stashed_, k, stashedCount_); }

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
        it = stashed_.erase(it);
      } else {
        ++it;
      }
    }
    return n;
  }

  std::size_t postedCount() const { return postedCount_; }
  std::size_t stashedCount() const { return stashedCount_; }

 private:
  // The oldest entry of `queues` under k, removed.
  template <class T>
  static std::optional<T> popFront(std::unordered_map<Key, std::deque<T>, Hash>& queues, const Key& k,
                                   std::size_t& count) {
    auto it = queues.find(k);
    if (it == queues.end()) return std::nullopt;
    T front = std::move(it->second.front());
    it->second.pop_front();
    if (it->second.empty()) queues.erase(it);
    --count;
    return front;
  }

  std::unordered_map<Key, std::deque<Posted>, Hash> posted_;
  std::unordered_map<Key, std::deque<Stashed>, Hash> stashed_;
  std::size_t postedCount_ = 0;
  std::size_t stashedCount_ = 0;
};

}  // namespace match
}  // namespace detail
}  // namespace tether
