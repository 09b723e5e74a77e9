// Who runs a world's io_context. During a blocking call the calling thread
// runs it itself, so a call costs no hand-off to another thread and back;
// between calls a background thread takes over (after a short linger, so
// back-to-back calls never wake it) and keeps links, handshakes and timers
// served. Exactly one thread runs the io_context at any time (the "baton"),
// which keeps all world state single-threaded.
#pragma once

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
  Driver(boost::asio::io_context& io, std::function<void()> between);
  ~Driver() { stop(); }

  void start();
  // Stops the background thread; no call may be running.
  void stop();

  // Runs the io_context on this thread until `done` completes or the deadline
  // passes; if another caller is running it, sleeps on `done` instead (the
  // background thread takes over when that caller leaves). True if done.
  bool waitUntil(Completion& done, Clock::time_point deadline);
  void wait(Completion& done) { waitUntil(done, Clock::time_point::max()); }
  // Never blocks: runs the handlers that are ready now on this thread if no
  // thread runs the io_context (else that thread makes the progress). True if done.
  bool poll(Completion& done);

 private:
  enum class Holder { None, Background, Caller };
  static constexpr auto kLinger = std::chrono::milliseconds(2);
  static constexpr auto kMaxRecheck = std::chrono::milliseconds(64);

  void backgroundLoop();
  bool takeBaton(std::unique_lock<std::mutex>& lock);
  void releaseBaton();

  boost::asio::io_context& io_;
  const std::function<void()> between_;
  std::mutex mutex_;
  std::condition_variable cv_;
  Holder holder_ = Holder::None;
  int waiters_ = 0;       // callers sleeping while another caller runs the io_context
  int wanting_ = 0;       // callers waiting for the background thread to hand over
  bool wakeNow_ = false;  // the background thread should take over at once
  bool stopping_ = false;
  const bool callerRuns_;  // TETHER_CALLER_PROGRESS (default 1)
  Clock::time_point lastRelease_{};
  std::uint64_t releases_ = 0;         // calls that left the event loop so far
  bool sleepingUntilRelease_ = false;  // the background thread waits for the next release
  std::thread thread_;
};

}  // namespace tether
