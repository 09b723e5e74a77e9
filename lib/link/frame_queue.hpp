// A link's queue of frames to write: a ring over one vector that grows (by
// doubling) and never shrinks, so a link in steady state queues and pops
// frames without allocating (a std::deque took a new block every few
// frames). A popped or erased slot is reset at once: its payload (a pooled
// copy, a shared table) is released as soon as it is written. Progress
// thread only (LinkWriter).
#pragma once

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

#include "base/layer.hpp"
#include "link/out_frame.hpp"

TETHER_LAYER(3, "link");

namespace tether::link {

class FrameQueue {
 public:
  bool empty() const { return n_ == 0; }
  std::size_t size() const { return n_; }
  // The i-th frame from the front.
  OutFrame& operator[](std::size_t i) { return slots_[(head_ + i) & (slots_.size() - 1)]; }
  const OutFrame& operator[](std::size_t i) const { return slots_[(head_ + i) & (slots_.size() - 1)]; }
  OutFrame& front() { return (*this)[0]; }

  void push_back(OutFrame f) {
    if (n_ == slots_.size()) grow();
    (*this)[n_] = std::move(f);
    ++n_;
  }
  void pop_front() {
    front() = OutFrame{};
    head_ = (head_ + 1) & (slots_.size() - 1);
    --n_;
  }
  // Removes the frames from position `first` on that `drop` selects, keeping
  // the others' order.
  template <class Pred>
  void eraseFrom(std::size_t first, Pred&& drop) {
    std::size_t kept = first;
    for (std::size_t i = first; i < n_; ++i) {
      if (drop((*this)[i])) continue;
      if (kept != i) (*this)[kept] = std::move((*this)[i]);
      ++kept;
    }
    for (std::size_t i = kept; i < n_; ++i) (*this)[i] = OutFrame{};
    n_ = kept;
  }
  void clear() {
    for (std::size_t i = 0; i < n_; ++i) (*this)[i] = OutFrame{};
    head_ = n_ = 0;
  }

 private:
  // A power of two, so an index wraps with a mask.
  void grow() {
    std::vector<OutFrame> bigger(std::max<std::size_t>(16, 2 * slots_.size()));
    for (std::size_t i = 0; i < n_; ++i) bigger[i] = std::move((*this)[i]);
    slots_.swap(bigger);
    head_ = 0;
  }

  std::vector<OutFrame> slots_;
  std::size_t head_ = 0, n_ = 0;
};

}  // namespace tether::link
