// Buffers for the copies of small frames (a send that must wait behind other
// frames on its link, copied instead of referenced, Calls::sendFrame; and a
// point-to-point credit's payload, Calls::frameReceived), reused once the link
// that wrote one has dropped it: a copied send or a credit allocates nothing
// in steady state. At most kBuffers of at most kMaxBytes are kept; a
// larger copy, or one while all are queued, gets a buffer of its own.
// Progress thread only.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "base/layer.hpp"
#include "wire/handshake.hpp"

TETHER_LAYER(6, "core");

namespace tether {

class PayloadPool {
 public:
  static constexpr std::size_t kMaxBytes = 4096;
  static constexpr std::size_t kBuffers = 64;

  // A buffer holding the `n` bytes at `p`.
  wire::SharedBytes copy(const unsigned char* p, std::size_t n) {
    if (n > kMaxBytes) return std::make_shared<const wire::Bytes>(p, p + n);
    for (std::size_t i = 0; i < buffers_.size(); ++i) {
      auto& b = buffers_[(next_ + i) % buffers_.size()];
      if (b.use_count() != 1) continue;  // a link still holds it
      next_ = (next_ + i + 1) % buffers_.size();
      b->assign(p, p + n);
      return b;
    }
    auto b = std::make_shared<wire::Bytes>(p, p + n);
    if (buffers_.size() < kBuffers) {
      if (buffers_.capacity() == 0) buffers_.reserve(kBuffers);
      buffers_.push_back(b);
    }
    return b;
  }

 private:
  std::vector<std::shared_ptr<wire::Bytes>> buffers_;
  std::size_t next_ = 0;
};

}  // namespace tether
