// tether/detail/core/call_request.hpp — what a nonblocking call's request
// does (tether/request.hpp), the same in every world: test() makes progress
// and rethrows the call's error once it ended, wait() waits to the given
// timeout (0: the communicator's) and rethrows, cancel() asks the world to
// withdraw the call, and a request dropped before its call ended lets it go
// as its world does (cancels it, or waits for it) with its errors dropped.
// Over a world's `Handle` on the call:
//   bool done() const              the call ended
//   bool poll()                    progress without waiting (past its deadline it fails); true once it ended
//   void waitUntil(time_point)     waits for its end; at that time it fails (Timeout)
//   bool cancel()                  true if the call ended because of it (Aborted)
//   void rethrow() const           its error, if it failed
//   void drop()                    the request goes before the call ended
//   std::string name() const; int rank() const; std::chrono::milliseconds timeout() const
// lib/core's requests.cpp (a handle on an Op and its Completion) and the
// testing world's detail/requests.hpp (on a Run). Header-only, C++17.
#pragma once

#include <chrono>
#include <utility>

#include "tether/detail/core/deadlines.hpp"
#include "tether/request.hpp"

namespace tether {
namespace detail {
namespace core {

template <class Handle>
class CallRequest : public Request::Impl {
 public:
  explicit CallRequest(Handle handle) : handle_(std::move(handle)) {}
  ~CallRequest() override {
    if (handle_.done()) return;
    try {
      handle_.drop();
    } catch (...) {  // nobody asked
    }
  }
  CallRequest(const CallRequest&) = delete;
  CallRequest& operator=(const CallRequest&) = delete;

  bool test() override {
    if (!handle_.poll()) return false;
    handle_.rethrow();
    return true;
  }
  // Past `timeout` (0: the communicator's) it fails with Timeout, as a blocking call.
  void wait(std::chrono::milliseconds timeout) override {
    const auto until = waitDeadline(
        handle_.rank(), [&] { return handle_.name(); }, timeout, handle_.timeout());
    if (!handle_.done()) handle_.waitUntil(until);
    handle_.rethrow();
  }
  bool cancel() override { return !handle_.done() && handle_.cancel(); }

 private:
  Handle handle_;
};

}  // namespace core
}  // namespace detail
}  // namespace tether
