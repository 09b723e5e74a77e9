#include "core/driver.hpp"

#include <sched.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

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

Driver::~Driver() {
  stop();
  if (timer_ >= 0) ::close(timer_);
}

void Driver::start() {
  timer_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);  // steady_clock's clock
  if (timer_ < 0) throw std::system_error(errno, std::generic_category(), "timerfd_create");
  thread_ = std::thread([this] { backgroundLoop(); });
}

void Driver::stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    if (holder_ == Holder::Background) io_.stop();
    setTimer(Clock::time_point::min());
  }
  thread_.join();
}

void Driver::setTimer(Clock::time_point when) {
  itimerspec spec{};
  const auto ns = std::max<std::int64_t>(
      1, std::chrono::duration_cast<std::chrono::nanoseconds>(when.time_since_epoch()).count());  // 0 would clear it
  spec.it_value.tv_sec = static_cast<time_t>(ns / 1000000000);
  spec.it_value.tv_nsec = static_cast<long>(ns % 1000000000);
  ::timerfd_settime(timer_, TFD_TIMER_ABSTIME, &spec, nullptr);  // cannot fail on a valid timerfd and time
}

void Driver::clearTimer() {
  const itimerspec none{};
  ::timerfd_settime(timer_, 0, &none, nullptr);
}

void Driver::sleepOnTimer() {
  std::uint64_t expirations;
  // Returns when the timer fires; one that was set again or cleared before
  // this read sleeps on (timerfd_settime resets the count); EINTR: look again.
  (void)!::read(timer_, &expirations, sizeof expirations);
}

// Under mutex_, after each wake-up of the background thread (the timer fired,
// or it just left the loop).
bool Driver::backgroundShouldTake(Clock::time_point now) {
  looks_.fetch_add(1, std::memory_order_relaxed);
  if (holder_ != Holder::None || wanting_ > 0) {
    // A caller runs the event loop (or is about to). Frames arriving
    // meanwhile wait in the kernel's socket buffers.
    if (watch_ == Watch::UntilRelease) return false;  // a late wake-up: the timer is clear
    if (watch_ == Watch::BackOff && releases_ == seenReleases_ && recheck_ > kLinger) {
      // One call held the loop through a whole back-off: sleep until it
      // leaves, so a long call costs one look, not one per doubling.
      watch_ = Watch::UntilRelease;
      clearTimer();
      return false;
    }
    // Calls come and go (or one held the loop since this thread left it):
    // look again after a while, backing off while they keep coming.
    watch_ = Watch::BackOff;
    seenReleases_ = releases_;
    setTimer(now + recheck_);
    recheck_ = std::min(recheck_ * 2, kMaxRecheck);
    return false;
  }
  if (!wakeNow_ && now < notBefore_) {  // a caller just left; it is likely back soon
    setTimer(notBefore_);
    return false;
  }
  return true;
}

void Driver::backgroundLoop() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (!backgroundShouldTake(Clock::now())) {
      lock.unlock();
      sleepOnTimer();
      lock.lock();
      continue;
    }
    holder_ = Holder::Background;
    watch_ = Watch::Holding;
    wakeNow_ = false;
    io_.restart();  // under the lock: a caller's stop() cannot come before it
    lock.unlock();
    while (io_.run_one()) between_();  // until a caller (or stop) calls io_.stop()
    lock.lock();
    holder_ = Holder::None;
    // The caller that stopped it is about to run the loop: first look after
    // the shortest back-off.
    watch_ = Watch::BackOff;
    recheck_ = kLinger;
    seenReleases_ = releases_;
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
      takenAt_ = Clock::now();
      if (watch_ == Watch::AfterRelease) {  // back within the linger of a long call: no look needed
        watch_ = Watch::UntilRelease;
        clearTimer();
      }
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
  std::lock_guard lock(mutex_);
  const auto now = Clock::now();
  holder_ = Holder::None;
  ++releases_;
  if (waiters_ > 0) {  // their operations still need progress now
    wakeNow_ = true;
    setTimer(now);
    return;
  }
  if (watch_ != Watch::UntilRelease) {  // its timer is set: it looks then
    notBefore_ = now + kLinger;
    return;
  }
  if (now - takenAt_ >= kMaxRecheck) {
    // A long call (a large world on few cores): the next one likely starts
    // within the longest back-off, and clears the timer then.
    watch_ = Watch::AfterRelease;
    notBefore_ = now + kMaxRecheck;
  } else {
    // Shorter calls: a look after the linger (has this process gone idle?),
    // then the back-off where it was; that look sees a release since the
    // last one, so it does not go back to sleep until the next release.
    watch_ = Watch::BackOff;
    notBefore_ = now + kLinger;
  }
  setTimer(notBefore_);
}

bool Driver::takeIfFree() {
  std::lock_guard lock(mutex_);
  if (holder_ != Holder::None || wanting_ > 0 || waiters_ > 0 || stopping_) return false;
  holder_ = Holder::Caller;
  return true;
}

// Gives back what takeIfFree took. Not a caller leaving the loop (no release is
// counted): a caller that took it to start a call is about to wait, or returns
// to its own work between tests. Whoever wanted the baton meanwhile is woken
// as on any release; so is the background thread if it went to sleep until a
// release meanwhile (a start that held the loop through its back-off): else
// nobody would run the loop until this process called in again.
void Driver::releaseIfTaken() {
  bool wakeCallers;
  {
    std::lock_guard lock(mutex_);
    holder_ = Holder::None;
    // A call's start ran, as a handler would: the tests that follow poll for
    // its answer a budget from now (without this a test right after an
    // inline start went to sleep at once when no handler had run lately).
    if (pollUs_.load(std::memory_order_relaxed) > 0) lastProgress_ = Clock::now();
    wakeCallers = wanting_ > 0;
    if (waiters_ > 0) {
      wakeNow_ = true;
      setTimer(Clock::time_point::min());
    } else if (watch_ == Watch::UntilRelease) {
      watch_ = Watch::BackOff;
      recheck_ = kLinger;
      seenReleases_ = releases_;
      setTimer(Clock::now() + kLinger);  // the call it started takes the loop before, if it waits
    }
  }
  if (wakeCallers) cv_.notify_all();
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
