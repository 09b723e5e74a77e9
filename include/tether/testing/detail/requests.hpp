// tether/testing/detail/requests.hpp — the in-process world's nonblocking
// calls (tether/request.hpp), with the semantics of TcpBootstrap's:
//  * isend: the payload is copied into the receiver's mailbox at once, and
//    the request is done when made — unless the point-to-point window holds
//    it (world_state.hpp): then it is done once delivered, and fails at its
//    deadline; cancel() returns false.
//  * irecv: a receive posted in the call table, filled by the sender's delivery;
//    cancel() withdraws it while unmatched (the communicator stays usable).
//  * isend and irecv fail at the communicator's deadline from their start,
//    whether waited for or only tested (test() then throws the Timeout).
//  * collectives: a run (detail/collective_run.hpp) the peers' messages
//    drive, as the TCP world's progress thread drives its own, so peers
//    progress whether or not this rank tests; test() and wait() fail it at
//    its deadline; cancel() fails it with Aborted "cancelled on this rank",
//    leaves the communicator unusable and, on the world communicator, aborts
//    the world naming this rank.
// A request not done when destroyed is cancelled and waited for, so the
// caller's buffers are never touched after the destructor. Header-only, C++17.
#pragma once

#include <algorithm>
#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <utility>

#include "tether/detail/core/deadlines.hpp"
#include "tether/error.hpp"
#include "tether/request.hpp"
#include "tether/testing/detail/collective_run.hpp"
#include "tether/testing/detail/endpoint.hpp"

namespace tether {
namespace testing {
namespace detail {

// What every in-process request shares: its endpoint (kept alive by
// `owner`), its name in errors, and the check of wait()'s argument.
class RequestBase : public Request::Impl {
 protected:
  RequestBase(std::shared_ptr<const void> owner, const Endpoint& endpoint, std::string where)
      : owner_(std::move(owner)), endpoint_(endpoint), where_(std::move(where)) {}

  // wait(timeout)'s deadline: 0 means the communicator's timeout.
  Endpoint::Clock::time_point until(std::chrono::milliseconds timeout) const {
    return ::tether::detail::core::waitDeadline(
        endpoint_.rank(), [&] { return where_; }, timeout, endpoint_.timeout());
  }

  std::shared_ptr<const void> owner_;
  const Endpoint& endpoint_;
  const std::string where_;  // "recv from rank 0 tag 3", "allgather#2"
};

// isend and irecv: done once `ready()`; test() and wait() run to the
// communicator's deadline from the start (`deadline_`), whether the caller
// waits or only tests; the first outcome is kept (`ended`).
class PointRequest : public RequestBase {
 public:
  bool test() override {
    if (!finished_) {
      try {
        if (!ready()) {
          if (Endpoint::Clock::now() < deadline_) return false;
          block(deadline_);  // past its deadline: the Timeout
        }
        ended(nullptr);
      } catch (...) {
        ended(std::current_exception());
      }
    }
    if (error_) std::rethrow_exception(error_);
    return true;
  }
  void wait(std::chrono::milliseconds timeout) override {
    const auto until = std::min(this->until(timeout), deadline_);
    if (!finished_) {
      try {
        block(until);
        ended(nullptr);
      } catch (...) {
        ended(std::current_exception());
      }
    }
    if (error_) std::rethrow_exception(error_);
  }

 protected:
  PointRequest(std::shared_ptr<const void> owner, const Endpoint& endpoint, std::string where,
               Endpoint::Clock::time_point deadline)
      : RequestBase(std::move(owner), endpoint, std::move(where)), deadline_(deadline) {}

  virtual bool ready() = 0;                                   // done now? (throws its failure)
  virtual void block(Endpoint::Clock::time_point until) = 0;  // waits until done (throws)
  // The outcome: nullptr once done, else the failure; sets finished_/error_.
  virtual void ended(std::exception_ptr error) {
    finished_ = true;
    error_ = std::move(error);
  }

  const Endpoint::Clock::time_point deadline_;  // the communicator's timeout from the start
  bool finished_ = false;
  std::exception_ptr error_;
};

// isend: delivered when made, or held by the window until the peer has
// received enough; never withdrawn (cancel() is false), waited for when
// destroyed (until its deadline).
class SentRequest final : public PointRequest {
 public:
  SentRequest(std::shared_ptr<const void> owner, const Endpoint& endpoint, std::string where, Endpoint::Sent sent,
              Endpoint::Clock::time_point deadline)
      : PointRequest(std::move(owner), endpoint, std::move(where), deadline), sent_(std::move(sent)) {}
  ~SentRequest() override {
    if (finished_) return;
    try {
      endpoint_.waitSent(sent_, deadline_, where_);
    } catch (...) {
    }
  }
  bool cancel() override { return false; }

 private:
  bool ready() override { return endpoint_.delivered(sent_, where_); }
  void block(Endpoint::Clock::time_point until) override { endpoint_.waitSent(sent_, until, where_); }

  const Endpoint::Sent sent_;
};

// irecv: posted now (or filled at once from a message that came first);
// done once a message fills it.
class RecvRequest final : public PointRequest {
 public:
  RecvRequest(std::shared_ptr<const void> owner, const Endpoint& endpoint, void* data, std::size_t bytes, int peer,
              int tag, const std::string& where)
      : PointRequest(std::move(owner), endpoint, where, endpoint.deadline()), call_(endpoint.call(where)) {
    endpoint_.post(call_, endpoint_.pointToPoint(peer, tag), data, bytes);
  }
  ~RecvRequest() override { endpoint_.withdraw(call_); }

  bool cancel() override {
    if (finished_ || !endpoint_.withdraw(call_)) return false;
    finished_ = true;
    error_ = std::make_exception_ptr(Error(ErrorCode::Aborted,
                                           failures::failure(endpoint_.who(), where_, failures::cancelledOnThisRank()),
                                           endpoint_.rank(), -1));
    return true;
  }

 private:
  bool ready() override { return endpoint_.settled(call_); }
  void block(Endpoint::Clock::time_point until) override { endpoint_.settle(call_, until); }
  // Failed before a message came: withdrawn.
  void ended(std::exception_ptr error) override {
    if (error) endpoint_.withdraw(call_);
    PointRequest::ended(std::move(error));
  }

  Call call_;  // the call table points to it while its receive is posted
};

// A collective started: its run goes on as messages come; test() and
// wait() look at it (and fail it at its deadline), cancel() fails it.
class CollectiveRequest final : public RequestBase {
 public:
  CollectiveRequest(std::shared_ptr<const void> owner, const Endpoint& endpoint, const std::string& where,
                    bool abortWorldOnCancel, std::shared_ptr<CollectiveRun> run)
      : RequestBase(std::move(owner), endpoint, where), abortWorldOnCancel_(abortWorldOnCancel), run_(std::move(run)) {}
  ~CollectiveRequest() override {
    try {
      cancel();
    } catch (...) {
    }
  }

  bool test() override {
    if (!run_->test()) return false;
    if (auto e = run_->error()) std::rethrow_exception(e);
    return true;
  }

  // Past `timeout` it fails with Timeout, as a blocking call.
  void wait(std::chrono::milliseconds timeout) override {
    if (auto e = run_->wait(until(timeout))) std::rethrow_exception(e);
  }

  // True if the call ended because of it.
  bool cancel() override {
    const auto e = std::make_exception_ptr(
        Error(ErrorCode::Aborted, failures::failure(endpoint_.who(), where_, failures::cancelledOnThisRank()),
              endpoint_.rank(), -1));
    if (!run_->cancel(e)) return false;
    // Peers have started it too and wait for steps this rank will not send.
    if (abortWorldOnCancel_)
      endpoint_.world()->abortAll(endpoint_.worldRank(),
                                  failures::failure(endpoint_.who(), where_, failures::cancelledOnThisRank()));
    return true;
  }

 private:
  const bool abortWorldOnCancel_;
  const std::shared_ptr<CollectiveRun> run_;
};

}  // namespace detail
}  // namespace testing
}  // namespace tether
