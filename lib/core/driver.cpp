#include "core/driver.hpp"

#include <sched.h>

#include <algorithm>
#include <thread>

namespace tether {

Driver::Driver(boost::asio::io_context& io, int pollUs, std::function<void()> between)
    : io_(io), between_(std::move(between)), pollSetting_(pollUs) {}

void Driver::setRanksOnHost(int ranks) {
  const auto cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  pollUs_.store(ranks <= cores ? pollSetting_ : 0, std::memory_order_relaxed);
}

void Driver::runUntil(Completion& done, Clock::time_point deadline) {
  const auto budget = pollBudget();
  auto pollUntil = budget.count() > 0 ? Clock::now() + budget : Clock::time_point::min();
  while (!done.isDone()) {
    const auto now = Clock::now();
    if (now >= deadline) {
      // What is already here (a frame, or an abort notice that came while
      // this process was stopped past its deadline) is handled before the
      // call times out, so the call ends as it would have in time.
      for (int i = 0; i < 64 && !done.isDone() && io_.poll_one(); ++i) between_();
      return;
    }
    if (now < pollUntil) {
      if (io_.poll_one()) {  // a non-blocking epoll_wait when nothing is queued
        between_();
        pollUntil = Clock::now() + budget;
      } else {
        sched_yield();  // a peer waiting for this core (a loaded host) runs first
      }
      continue;
    }
    if (io_.run_one_until(deadline)) {
      between_();
      if (budget.count() > 0) pollUntil = Clock::now() + budget;
    }
  }
}

void Driver::start() {
  thread_ = std::thread([this] { backgroundLoop(); });
}

void Driver::stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    if (holder_ == Holder::Background) io_.stop();
  }
  cv_.notify_all();
  thread_.join();
}

void Driver::backgroundLoop() {
  std::unique_lock lock(mutex_);
  auto recheck = kLinger;  // how long to sleep while callers are busy
  std::uint64_t seenReleases = releases_;
  while (!stopping_) {
    if (holder_ != Holder::None || wanting_ > 0) {
      // A caller runs the event loop. Releasing the baton does not wake this
      // thread (that would cost every call a context switch): it looks again
      // after a while, backing off while calls keep coming, and so takes over
      // at most kMaxRecheck after the last call left. Frames arriving
      // meanwhile wait in the kernel's socket buffers. If one call has held
      // the loop through a whole recheck (no call left since the last look),
      // this thread sleeps until that call leaves (releaseBaton wakes it), so
      // a long call costs it one look, not one per doubling up to
      // kMaxRecheck (at 1,024 ranks on 2 cores: 10-12 % fewer context
      // switches, docs/benchmarks.md).
      if (releases_ == seenReleases && recheck > kLinger) {
        sleepingUntilRelease_ = true;
        cv_.wait(lock);
        sleepingUntilRelease_ = false;
      } else {
        seenReleases = releases_;
        cv_.wait_for(lock, recheck);
        recheck = std::min(recheck * 2, kMaxRecheck);
      }
      continue;
    }
    if (!wakeNow_) {
      auto due = lastRelease_ + kLinger;
      if (Clock::now() < due) {  // a caller just left; it is likely back soon
        cv_.wait_until(lock, due);
        continue;
      }
    }
    holder_ = Holder::Background;
    wakeNow_ = false;
    recheck = kLinger;
    io_.restart();  // under the lock: a caller's stop() cannot come before it
    lock.unlock();
    while (io_.run_one()) between_();  // until a caller (or stop) calls io_.stop()
    lock.lock();
    holder_ = Holder::None;
    cv_.notify_all();
  }
}

// Under `lock`. True: this thread holds the baton. False: another caller
// holds it and this thread is registered as a waiter.
bool Driver::takeBaton(std::unique_lock<std::mutex>& lock) {
  ++wanting_;  // keeps the background thread from taking the baton back meanwhile
  for (;;) {
    if (holder_ == Holder::None) {
      --wanting_;
      holder_ = Holder::Caller;
      return true;
    }
    if (holder_ == Holder::Caller) {
      --wanting_;
      ++waiters_;
      return false;
    }
    io_.stop();  // the background thread leaves run() after its current handler
    cv_.wait(lock);
  }
}

void Driver::releaseBaton() {
  bool wakeBackground;
  {
    std::lock_guard lock(mutex_);
    holder_ = Holder::None;
    lastRelease_ = Clock::now();
    ++releases_;
    if (waiters_ > 0) wakeNow_ = true;  // their operations still need progress now
    wakeBackground = waiters_ > 0 || sleepingUntilRelease_;
  }
  if (wakeBackground) cv_.notify_all();
}

bool Driver::takeIfFree() {
  std::lock_guard lock(mutex_);
  if (holder_ != Holder::None || wanting_ > 0 || waiters_ > 0 || stopping_) return false;
  holder_ = Holder::Caller;
  return true;
}

// Gives back what takeIfFree took. Not a caller leaving the loop (no release is
// counted, the background thread is not woken): a caller that took it to
// start a call is about to wait, or returns to its own work between tests.
// Whoever wanted the baton meanwhile is woken as on any release; so is the
// background thread if it went to sleep until a release meanwhile (a start
// that held the loop through its back-off): else nobody would run the loop
// until this process called in again.
void Driver::releaseIfTaken() {
  bool wake;
  {
    std::lock_guard lock(mutex_);
    holder_ = Holder::None;
    wake = wanting_ > 0 || waiters_ > 0 || sleepingUntilRelease_;
    if (waiters_ > 0) wakeNow_ = true;
  }
  if (wake) cv_.notify_all();
}

bool Driver::waitUntil(Completion& done, Clock::time_point deadline) {
  if (done.isDone()) return true;
  std::unique_lock lock(mutex_);
  if (takeBaton(lock)) {
    io_.restart();
    lock.unlock();
    runUntil(done, deadline);
    releaseBaton();
    return done.isDone();
  }
  lock.unlock();
  bool ok = done.waitUntil(deadline);
  lock.lock();
  --waiters_;
  return ok;
}

bool Driver::poll(Completion& done, Clock::time_point deadline) {
  if (done.isDone()) return true;
  std::unique_lock lock(mutex_);
  // Past the poll budget of tests that ran no handler, a test sleeps (up to
  // kTestSleep, so never where the deadline is nearer).
  const auto now = Clock::now();
  const bool sleep = now - lastProgress_ >= pollBudget() && now + kTestSleep <= deadline;
  if (!takeBaton(lock)) {  // another caller runs the loop and makes the progress
    lock.unlock();
    const bool ok = done.waitUntil(sleep ? now + kTestSleep : now);
    lock.lock();
    --waiters_;
    return ok;
  }
  io_.restart();
  lock.unlock();
  bool progressed = false;
  if (sleep) {
    // Until done or kTestSleep, like a blocking call meanwhile (epoll_wait's
    // timeout is whole milliseconds: Asio rounds a shorter one up, and a
    // timer to end the sleep sooner cost a timer reprogramming in the kernel
    // and a stray wake-up where the test ended first: +30 % CPU per call).
    while (!done.isDone() && io_.run_one_until(now + kTestSleep)) {
      between_();
      progressed = true;
    }
  } else {
    while (!done.isDone() && io_.poll_one()) {
      between_();
      progressed = true;
    }
    if (!progressed && !done.isDone()) sched_yield();  // a peer waiting for this core (a loaded host) runs first
  }
  if (progressed) {
    std::lock_guard guard(mutex_);
    lastProgress_ = Clock::now();
  }
  releaseBaton();
  return done.isDone();
}

}  // namespace tether
