// The calling thread's side of a blocking call: sleeps in the kernel (no
// spinning) until the progress thread reports the result or the deadline
// passes. A single futex word: one FUTEX_WAIT and one FUTEX_WAKE per call
// (none when the result is there before anyone sleeps), where a mutex and
// condition variable cost more system calls.
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
  // First call wins; later calls are ignored. The exchange that publishes
  // kDone is this call's last access to the object: a waiter that sees kDone
  // may free it at once, so the wake-up below passes only the address to the
  // kernel (FUTEX_WAKE on a freed word wakes nobody and touches no memory).
  void complete(std::exception_ptr e) {
    if (claimed_.exchange(true, std::memory_order_acq_rel)) return;
    error_ = std::move(e);
    int* word = reinterpret_cast<int*>(&state_);
    if (state_.exchange(kDone, std::memory_order_acq_rel) == kWaited)
      ::syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr, 0);
  }

  // True when completed before the deadline.
  bool waitUntil(std::chrono::steady_clock::time_point deadline) {
    for (;;) {
      if (isDone()) return true;
      auto left = deadline - std::chrono::steady_clock::now();
      if (left <= std::chrono::steady_clock::duration::zero()) return false;
      auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
      timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
      sleep(&ts);
    }
  }

  void wait() {
    while (!isDone()) sleep(nullptr);
  }

  // Ready for another call. Only by its last owner, once no thread uses it
  // (World keeps the result of a finished call in nothing else).
  void reset() {
    error_ = nullptr;
    claimed_.store(false, std::memory_order_relaxed);
    state_.store(kPending, std::memory_order_release);
  }

  bool isDone() const { return state_.load(std::memory_order_acquire) == kDone; }

  void rethrowIfFailed() const {
    if (isDone() && error_) std::rethrow_exception(error_);
  }

 private:
  // kPending: nobody sleeps on the word. kWaited: a waiter announced itself
  // and sleeps (or is about to) while the word holds kWaited, so complete()
  // must wake it. kDone: final.
  static constexpr int kPending = 0, kWaited = 1, kDone = 2;

  void sleep(const timespec* relative) {
    int expected = kPending;
    // Announce: kPending -> kWaited. Fails only if already kWaited (sleep
    // again) or kDone (return; the caller's loop sees it).
    if (!state_.compare_exchange_strong(expected, kWaited, std::memory_order_acq_rel) && expected == kDone) return;
    // Returns at once if the word is no longer kWaited (completed meanwhile).
    ::syscall(SYS_futex, reinterpret_cast<int*>(&state_), FUTEX_WAIT_PRIVATE, kWaited, relative, nullptr, 0);
  }

  static_assert(sizeof(std::atomic<int>) == sizeof(int), "the futex word is the atomic itself");
  std::atomic<int> state_{kPending};
  std::atomic<bool> claimed_{false};
  std::exception_ptr error_;
};

}  // namespace tether
