// The deadlines of nonblocking calls (tether/request.hpp): a request's
// operation fails at the communicator's deadline whether or not anybody
// waits for it then. One timer for all of them, set for the earliest (as
// libuv keeps its timers): the ops wait in the shared DeadlineQueue
// (tether/detail/core/deadline_queue.hpp, the testing world's too), joined
// when their run starts and left when they end, so a
// steady-state isend or irecv allocates no timer and no handler (the timer is
// set again only when the earliest deadline moves earlier, or it fired).
// Progress thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <memory>
#include <optional>

#include "base/layer.hpp"
#include "core/op.hpp"
#include "tether/detail/core/deadline_queue.hpp"

TETHER_LAYER(6, "core");

namespace tether {

class RequestDeadlines {
 public:
  // `expired(op)`: op's deadline passed (it is still running).
  RequestDeadlines(boost::asio::io_context& io, std::function<void(std::shared_ptr<Op>)> expired)
      : io_(io), expired_(std::move(expired)) {}
  ~RequestDeadlines() { ops_.clear(); }
  RequestDeadlines(const RequestDeadlines&) = delete;
  RequestDeadlines& operator=(const RequestDeadlines&) = delete;

  // `op` (op.expires set, op.self its owner) started; at op.expires, unless
  // it ended, it is handed to `expired`.
  void add(Op& op);
  // `op` ended (nothing if it had no deadline).
  void remove(Op& op);
  // The loop no longer runs: the timer goes (before its io_context).
  void stop() {
    ops_.clear();
    timer_.reset();
    armedFor_ = Op::Clock::time_point::max();
  }

 private:
  // Sets the timer for the earliest deadline, if it is not set for it already.
  void arm();
  void fired();

  boost::asio::io_context& io_;
  std::optional<boost::asio::steady_timer> timer_;  // made at the first deadline (io_ may not be built yet)
  std::function<void(std::shared_ptr<Op>)> expired_;
  detail::core::DeadlineQueue<Op, &Op::deadlineHook> ops_;
  // What the timer is set for (max: not set). Deadlines of one timeout come
  // in order, so the timer is set once per timeout period, not per request.
  Op::Clock::time_point armedFor_ = Op::Clock::time_point::max();
};

}  // namespace tether
