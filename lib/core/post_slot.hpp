// Memory for one handler posted at a time (a call's start on the progress
// thread), so that posting it allocates nothing: Asio allocates a posted
// handler with the handler's associated allocator (bind_allocator). A second
// handler while the first is queued, or a larger one, goes to the heap.
#pragma once

#include <atomic>
#include <cstddef>
#include <new>

#include "base/layer.hpp"

TETHER_LAYER(6, "core");

namespace tether {

class PostSlot {
 public:
  template <class T>
  class Allocator {
   public:
    using value_type = T;
    explicit Allocator(PostSlot* slot) : slot_(slot) {}
    template <class U>
    Allocator(const Allocator<U>& other) : slot_(other.slot()) {}  // NOLINT: rebinding converts implicitly

    T* allocate(std::size_t n) { return static_cast<T*>(slot_->take(n * sizeof(T))); }
    void deallocate(T* p, std::size_t) { slot_->give(p); }
    PostSlot* slot() const { return slot_; }
    template <class U>
    bool operator==(const Allocator<U>& other) const {
      return slot_ == other.slot();
    }
    template <class U>
    bool operator!=(const Allocator<U>& other) const {
      return slot_ != other.slot();
    }

   private:
    PostSlot* slot_;
  };

  Allocator<void> allocator() { return Allocator<void>(this); }

 private:
  static constexpr std::size_t kBytes = 256;

  void* take(std::size_t bytes) {
    if (bytes <= kBytes && !used_.exchange(true, std::memory_order_acquire)) return bytes_;
    return ::operator new(bytes);
  }
  void give(void* p) {
    if (p == bytes_)
      used_.store(false, std::memory_order_release);
    else
      ::operator delete(p);
  }

  alignas(std::max_align_t) unsigned char bytes_[kBytes];
  std::atomic<bool> used_{false};
};

}  // namespace tether
