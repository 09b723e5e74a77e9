// The mailbox: receives posted before their frame arrives, and frames that
// arrived before their receive was posted ("unexpected"), both under the full
// key. Used only on the progress thread; no locks.
#pragma once

#include <deque>
#include <optional>
#include <unordered_map>
#include <vector>

#include "match/key.hpp"
#include "wire/frame.hpp"
#include "base/layer.hpp"

TETHER_LAYER(2, "match");

namespace tether::match {

struct Posted {
  void* buf = nullptr;
  std::size_t len = 0;
  const void* owner = nullptr;  // the operation waiting on it
};

struct Stashed {
  wire::FrameHeader header;
  std::vector<unsigned char> payload;
};

class Mailbox {
 public:
  void post(const Key& k, Posted p) {
    posted_[k].push_back(p);
    ++postedCount_;
  }
  // The oldest receive posted under k.
  std::optional<Posted> claimPosted(const Key& k);
  // Withdraws `owner`'s receive under k; false if none.
  bool unpost(const Key& k, const void* owner);

  // Returns false (and keeps nothing) if a collective frame with this exact key
  // is already waiting: a duplicate.
  bool stash(const Key& k, Stashed f);
  std::optional<Stashed> takeStashed(const Key& k);

  // Visits every waiting frame (for diagnosing mismatched operations).
  template <class F>
  void forEachStashed(F&& f) const {
    for (const auto& [k, q] : stashed_)
      for (const auto& s : q) f(k, s);
  }
  // Drops every waiting frame for which pred(key) holds; returns how many.
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
  std::unordered_map<Key, std::deque<Posted>, KeyHash> posted_;
  std::unordered_map<Key, std::deque<Stashed>, KeyHash> stashed_;
  std::size_t postedCount_ = 0;
  std::size_t stashedCount_ = 0;
};

}  // namespace tether::match
