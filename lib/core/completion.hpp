// The calling thread's side of a blocking call: sleeps (no spinning) until the
// progress thread reports the result or the deadline passes.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>

namespace tether {

class Completion {
 public:
  void complete(std::exception_ptr e) {
    {
      std::lock_guard lock(mutex_);
      if (done_) return;
      done_ = true;
      error_ = e;
    }
    cv_.notify_all();
  }
  // True when completed before the deadline.
  bool waitUntil(std::chrono::steady_clock::time_point deadline) {
    std::unique_lock lock(mutex_);
    return cv_.wait_until(lock, deadline, [&] { return done_; });
  }
  void wait() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return done_; });
  }
  void rethrowIfFailed() const {
    std::lock_guard lock(mutex_);
    if (error_) std::rethrow_exception(error_);
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

}  // namespace tether
