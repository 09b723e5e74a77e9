// The calling thread's side of a blocking call: sleeps in the kernel (no
// spinning) until the progress thread reports the result or the deadline
// passes. A single futex word: one FUTEX_WAIT and one FUTEX_WAKE per call,
// where a mutex and condition variable cost more system calls.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <ctime>
#include <exception>

#include "base/layer.hpp"

TETHER_LAYER(6, "core");

namespace tether {

class Completion {
 public:
  // First call wins; later calls are ignored.
  void complete(std::exception_ptr e) {
    int expected = kPending;
    if (!state_.compare_exchange_strong(expected, kWriting, std::memory_order_acq_rel)) return;
    error_ = std::move(e);
    // seq_cst on both sides (here and in sleep()): the store must not pass the
    // load, or a waiter could announce itself unseen and sleep forever.
    state_.store(kDone, std::memory_order_seq_cst);
    if (waiting_.load(std::memory_order_seq_cst))
      ::syscall(SYS_futex, reinterpret_cast<int*>(&state_), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr, 0);
  }

  // True when completed before the deadline.
  bool waitUntil(std::chrono::steady_clock::time_point deadline) {
    for (;;) {
      int s = state_.load(std::memory_order_acquire);
      if (s == kDone) return true;
      auto left = deadline - std::chrono::steady_clock::now();
      if (left <= std::chrono::steady_clock::duration::zero()) return false;
      auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
      timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
      sleep(s, &ts);
    }
  }

  void wait() {
    for (;;) {
      int s = state_.load(std::memory_order_acquire);
      if (s == kDone) return;
      sleep(s, nullptr);
    }
  }

  bool isDone() const { return state_.load(std::memory_order_acquire) == kDone; }

  void rethrowIfFailed() const {
    if (state_.load(std::memory_order_acquire) == kDone && error_) std::rethrow_exception(error_);
  }

 private:
  static constexpr int kPending = 0, kWriting = 1, kDone = 2;

  void sleep(int seen, const timespec* relative) {
    waiting_.store(true, std::memory_order_seq_cst);
    // Re-check after announcing ourselves: complete() either sees waiting_ or
    // we see its state change; FUTEX_WAIT also returns at once if the word moved.
    if (state_.load(std::memory_order_seq_cst) != seen) return;
    ::syscall(SYS_futex, reinterpret_cast<int*>(&state_), FUTEX_WAIT_PRIVATE, seen, relative, nullptr, 0);
  }

  static_assert(sizeof(std::atomic<int>) == sizeof(int), "the futex word is the atomic itself");
  std::atomic<int> state_{kPending};
  std::atomic<bool> waiting_{false};
  std::exception_ptr error_;
};

}  // namespace tether
