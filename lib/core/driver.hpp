// Who runs a world's io_context. During a blocking call the calling thread
// runs it itself, so a call costs no hand-off to another thread and back;
// between calls a background thread takes over (after a linger, so
// back-to-back calls never wake it) and keeps links, handshakes and timers
// served. Exactly one thread runs the io_context at any time (the "baton"),
// which keeps all world state single-threaded.
//
// The background thread sleeps on a timer (a timerfd), not on a condition
// variable, so that a caller can say when it should look next without waking
// it: a call that leaves after holding the loop 64 ms or more (1,024 ranks on
// 2 cores) sets the timer to 64 ms later, and the next call, if it starts
// before then, clears it again; the background thread sleeps through the
// whole sequence of calls. Short calls leave the timer alone; the thread then
// looks with a back-off (2 ms doubling to 64 ms) and, once a look finds that
// no call left since the last one, sleeps until a call leaves. Either way it
// takes over at most 64 ms after the last call left.
//
// Where this host has a core for every rank of the world on it, a caller that
// runs the io_context polls it (non-blocking) for up to TcpOptions::pollUs (50) after
// each handler before it sleeps in epoll_wait: a reply that comes within that
// window costs no sleep and wake-up. Never on an oversubscribed host (the spin
// would steal the peer's core), never on the background thread (an idle rank
// stays at 0 CPU), and a caller that waits while another runs the loop sleeps.
//
// A nonblocking caller's test (poll) makes the progress itself: it takes the
// baton when it is free, or from the background thread (one hand-over; the
// linger then keeps the background thread away while tests keep coming), and
// runs the handlers that are ready. Tests that run no handler are a poll:
// within the poll budget (a blocking caller's, so 0 on an oversubscribed host)
// they only look, yielding the core; past it each test runs the loop like a
// blocking call for at most 1 ms (epoll_wait's granularity; never where the
// request's deadline is nearer), returning when its request is done. So a
// tight test loop costs what a blocking call does and leaves the core to the
// peers, and a caller that works between tests gets progress on every test.
// While another caller runs the loop, a test sleeps on its own request for
// that bound instead (that caller makes the progress).
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

#include "core/completion.hpp"
#include "base/layer.hpp"

TETHER_LAYER(6, "core");

namespace tether {

class Driver {
 public:
  using Clock = std::chrono::steady_clock;

  // `between` runs after every handler the io_context ran, on the thread
  // that runs it (the world resumes operations woken by that handler there).
  // `pollUs`: TcpOptions::pollUs (50 when not given), fixed at start.
  Driver(boost::asio::io_context& io, int pollUs, std::function<void()> between);
  ~Driver();

  // Opens the background thread's timer (close-on-exec) and starts the
  // thread; throws std::system_error when either cannot be had.
  void start();
  // Stops the background thread; no call may be running.
  void stop();

  // Runs the io_context on this thread until `done` completes or the deadline
  // passes; if another caller is running it, sleeps on `done` instead (the
  // background thread takes over when that caller leaves). True if done.
  bool waitUntil(Completion& done, Clock::time_point deadline);
  void wait(Completion& done) { waitUntil(done, Clock::time_point::max()); }
  // A test: runs the handlers that are ready now on this thread (taking the
  // baton from the background thread if it holds it); past the poll budget of
  // tests that ran none, runs the loop until `done` for up to kTestSleep,
  // sleeping in epoll_wait, never past `deadline` (class comment). True if done.
  bool poll(Completion& done, Clock::time_point deadline = Clock::time_point::max());

  // A turn of the event loop taken here and now, as a handler of the
  // io_context would run, when no thread runs it and none waits for it
  // (true if taken): a call's start so goes out at once instead of being
  // posted behind the event loop's own turn (a posted handler costs a
  // non-blocking epoll_wait before it runs: one system call per call). The
  // taker calls ran() after its work (runs `between`); the turn ends with it.
  class InlineTurn {
   public:
    explicit InlineTurn(Driver& d) : d_(d.takeIfFree() ? &d : nullptr) {}
    ~InlineTurn() {
      if (d_) d_->releaseIfTaken();
    }
    InlineTurn(const InlineTurn&) = delete;
    InlineTurn& operator=(const InlineTurn&) = delete;
    explicit operator bool() const { return d_ != nullptr; }
    void ran() { d_->between_(); }

   private:
    Driver* d_;
  };

  // After the rendezvous (any thread): `ranks` of the world run on this host.
  // Turns on polling (pollUs) when they are at most its online cores.
  void setRanksOnHost(int ranks);
  // How often the background thread has woken to look (its timer fired, or
  // it left the loop to a caller); any thread.
  std::uint64_t backgroundLooks() const { return looks_.load(std::memory_order_relaxed); }
  // How long a caller polls before it sleeps; 0 until setRanksOnHost allows it.
  std::chrono::microseconds pollBudget() const {
    return std::chrono::microseconds(pollUs_.load(std::memory_order_relaxed));
  }

 private:
  enum class Holder { None, Background, Caller };
  // What the background thread waits for while it does not hold the baton.
  enum class Watch {
    Holding,       // it runs the io_context
    BackOff,       // its timer is set for its next look (recheck_)
    UntilRelease,  // no timer: the next call to leave sets one
    AfterRelease,  // a long call left and set the timer; the next call to start clears it
  };
  static constexpr auto kLinger = std::chrono::milliseconds(2);
  static constexpr auto kMaxRecheck = std::chrono::milliseconds(64);
  // The longest sleep of a test once the tests have stopped making progress
  // (epoll_wait's granularity).
  static constexpr auto kTestSleep = std::chrono::milliseconds(1);

  void backgroundLoop();
  // Under mutex_: what the background thread does now, true when it should
  // take the baton; else it has set (or left) its timer and sleeps.
  bool backgroundShouldTake(Clock::time_point now);
  bool takeBaton(std::unique_lock<std::mutex>& lock);
  void releaseBaton();
  bool takeIfFree();
  void releaseIfTaken();
  // Under mutex_: the background thread's timer fires at `when` (a time
  // passed: at once) / never.
  void setTimer(Clock::time_point when);
  void clearTimer();
  // Without mutex_: sleeps until the timer fires.
  void sleepOnTimer();
  // The caller's loop: run handlers until `done` or the deadline, polling for
  // up to pollBudget() after each before sleeping in the kernel.
  void runUntil(Completion& done, Clock::time_point deadline);

  boost::asio::io_context& io_;
  const std::function<void()> between_;
  std::mutex mutex_;
  std::condition_variable cv_;  // callers waiting for the background thread to leave the loop
  Holder holder_ = Holder::None;
  int waiters_ = 0;       // callers sleeping while another caller runs the io_context
  int wanting_ = 0;       // callers waiting for the background thread to hand over
  bool wakeNow_ = false;  // the background thread should take over at once
  bool stopping_ = false;
  const std::int64_t pollSetting_;       // TcpOptions::pollUs
  std::atomic<std::int64_t> pollUs_{0};  // in effect: pollSetting_ where cores are free, else 0
  int timer_ = -1;                       // the background thread's timerfd
  Watch watch_ = Watch::BackOff;         // (its first look comes at once)
  Clock::time_point takenAt_{};          // when the running call took the baton
  Clock::time_point notBefore_{};        // the background thread takes the baton no earlier
  std::uint64_t releases_ = 0;           // calls that left the event loop so far
  std::uint64_t seenReleases_ = 0;       // releases_ at the background thread's last look
  std::chrono::milliseconds recheck_ = kLinger;  // its next back-off
  Clock::time_point lastProgress_{};             // when a test last ran a handler
  std::atomic<std::uint64_t> looks_{0};
  std::thread thread_;
};

}  // namespace tether
