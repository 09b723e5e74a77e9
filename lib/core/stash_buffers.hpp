// Buffers for stashed payloads (a data frame that arrived before its
// receive was posted), kept for the next one once a receive has taken the
// payload out: a steady state of early frames (a broadcast's, a gather's)
// allocates nothing. Buffers of at most kMaxBytes are kept, at most kBuffers
// of them and kKeptBytes in all; a larger one, or one past either, is freed.
// Progress thread only.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "base/layer.hpp"

TETHER_LAYER(6, "core");

namespace tether {

class StashBuffers {
 public:
  static constexpr std::size_t kMaxBytes = 64 * 1024;
  static constexpr std::size_t kKeptBytes = 1024 * 1024;
  static constexpr std::size_t kBuffers = 256;  // so that take() looks at a few hundred at most

  // A buffer of `length` bytes: the most recently kept one large enough
  // (the frames of a run of calls have the same sizes), else a new one.
  std::vector<unsigned char> take(std::size_t length) {
    if (length == 0) return {};
    for (std::size_t i = kept_.size(); i-- > 0;) {
      if (kept_[i].capacity() < length) continue;
      std::vector<unsigned char> b = std::move(kept_[i]);
      if (i + 1 != kept_.size()) kept_[i] = std::move(kept_.back());
      kept_.pop_back();
      keptBytes_ -= b.capacity();
      b.resize(length);
      return b;
    }
    return std::vector<unsigned char>(length);
  }

  // A payload taken out of its buffer: kept for take() if there is room.
  void give(std::vector<unsigned char>&& b) {
    const std::size_t bytes = b.capacity();
    if (bytes == 0 || bytes > kMaxBytes || keptBytes_ + bytes > kKeptBytes || kept_.size() == kBuffers) return;
    b.clear();
    kept_.push_back(std::move(b));
    keptBytes_ += bytes;
  }

  std::size_t keptBytes() const { return keptBytes_; }

 private:
  std::vector<std::vector<unsigned char>> kept_;
  std::size_t keptBytes_ = 0;  // their capacities
};

}  // namespace tether
