// Small containers for the simulator's per-rank state: at 131,072 ranks a
// std::deque or std::unordered_map per rank costs more than the state itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tether::sim {

inline constexpr std::uint32_t kNone = 0xffffffffu;

// A FIFO on a vector: push at the back, pop at the head; storage is reused
// once it drains and compacted when the popped part dominates.
template <class T>
class Fifo {
 public:
  bool empty() const { return head_ == items_.size(); }
  std::size_t size() const { return items_.size() - head_; }
  T& front() { return items_[head_]; }
  void push(const T& v) { items_.push_back(v); }
  T pop() {
    T v = items_[head_++];
    if (head_ == items_.size()) {
      items_.clear();
      head_ = 0;
    } else if (head_ > 64 && head_ * 2 > items_.size()) {
      items_.erase(items_.begin(), items_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
    return v;
  }
  // Frees the storage when empty (a finished rank keeps nothing).
  void shrink() {
    if (empty()) std::vector<T>().swap(items_), head_ = 0;
  }

 private:
  std::vector<T> items_;
  std::size_t head_ = 0;
};

// The links of one rank: peer -> state and the frames queued while the
// link comes up (a list threaded through the message pool). Open addressing,
// linear probing, never more than half full; links persist unless released
// (erase: backward-shift deletion).
struct LinkEntry {
  std::int32_t peer = -1;
  std::uint8_t up = 0;
  std::uint8_t release = 0;                  // released: the goodbye is under way
  std::uint32_t head = kNone, tail = kNone;  // queued messages, oldest first
  std::uint32_t lastUse = 0;                 // the link budget's clock when a frame last went or came
};

class PeerMap {
 public:
  std::size_t size() const { return count_; }
  LinkEntry* find(int peer) {
    if (slots_.empty()) return nullptr;
    for (std::size_t i = hash(peer);; i = (i + 1) & (slots_.size() - 1)) {
      if (slots_[i].peer == peer) return &slots_[i];
      if (slots_[i].peer < 0) return nullptr;
    }
  }
  const LinkEntry* find(int peer) const { return const_cast<PeerMap*>(this)->find(peer); }
  template <class F>
  void forEach(F f) const {
    for (const LinkEntry& e : slots_)
      if (e.peer >= 0) f(e.peer);
  }
  template <class F>
  void forEachEntry(F f) {
    for (LinkEntry& e : slots_)
      if (e.peer >= 0) f(e);
  }
  // The entry for `peer`, added (down, nothing queued) if missing.
  LinkEntry& insert(int peer) {
    if (LinkEntry* e = find(peer)) return *e;
    if ((count_ + 1) * 2 > slots_.size()) grow();
    ++count_;
    return place(peer);
  }

  void erase(int peer) {
    if (slots_.empty()) return;
    const std::size_t mask = slots_.size() - 1;
    std::size_t i = hash(peer);
    while (slots_[i].peer != peer) {
      if (slots_[i].peer < 0) return;
      i = (i + 1) & mask;
    }
    // Move later entries of the probe run back into the hole unless their
    // home slot lies cyclically in (hole, their slot].
    for (std::size_t j = (i + 1) & mask; slots_[j].peer >= 0; j = (j + 1) & mask) {
      const std::size_t k = hash(slots_[j].peer);
      const bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
      if (stays) continue;
      slots_[i] = slots_[j];
      i = j;
    }
    slots_[i] = LinkEntry{};
    --count_;
  }

 private:
  std::size_t hash(int peer) const { return (static_cast<std::uint32_t>(peer) * 2654435761u) & (slots_.size() - 1); }
  LinkEntry& place(int peer) {
    std::size_t i = hash(peer);
    while (slots_[i].peer >= 0) i = (i + 1) & (slots_.size() - 1);
    slots_[i].peer = peer;
    return slots_[i];
  }
  void grow() {
    std::vector<LinkEntry> old;
    old.swap(slots_);
    slots_.assign(old.empty() ? 4 : old.size() * 2, LinkEntry{});
    for (const LinkEntry& e : old)
      if (e.peer >= 0) place(e.peer) = e;
  }

  std::vector<LinkEntry> slots_;
  std::size_t count_ = 0;
};

}  // namespace tether::sim
