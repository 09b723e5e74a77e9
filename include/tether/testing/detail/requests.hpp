// tether/testing/detail/requests.hpp — the in-process world's nonblocking
// calls (tether/request.hpp): a request is a run (detail/run.hpp) that the
// peers' messages drive, as the TCP world's progress thread drives its own,
// with the semantics of TcpBootstrap's:
//  * isend: the payload is copied into the receiver's mailbox at once, and
//    the request is done when made — unless the point-to-point window holds
//    it (world_state.hpp): then it is done once delivered; cancel() returns
//    false, and a request destroyed before is waited for (to its deadline).
//  * irecv: a receive posted in the call table, filled by the sender's delivery;
//    cancel() withdraws it while unmatched (the communicator stays usable).
//  * collectives: cancel() fails it with Aborted "cancelled on this rank",
//    leaves the communicator unusable and, on the world communicator, aborts
//    the world naming this rank.
//  * each fails at the communicator's deadline from its start, whether
//    waited for, only tested (test() then throws the Timeout) or neither
//    (the world's timer thread fails it then; a world collective's failure
//    aborts the world then, as over TCP).
// A request not done when destroyed is cancelled, so the caller's buffers
// are never touched after the destructor. Header-only, C++17.
#pragma once

#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <utility>

#include "tether/detail/core/deadlines.hpp"
#include "tether/error.hpp"
#include "tether/request.hpp"
#include "tether/testing/detail/endpoint.hpp"
#include "tether/testing/detail/run.hpp"

namespace tether {
namespace testing {
namespace detail {

class RunRequest final : public Request::Impl {
 public:
  // What cancel() does: nothing (an isend), fail the call (an irecv, a
  // collective), and then abort the world (a collective of the world).
  enum class Cancel { Never, Fail, FailAndAbortWorld };

  // `owner` keeps the endpoint alive.
  RunRequest(std::shared_ptr<const void> owner, const Endpoint& endpoint, std::shared_ptr<Run> run, Cancel cancel)
      : owner_(std::move(owner)), endpoint_(endpoint), run_(std::move(run)), cancel_(cancel) {
    run_->watchDeadline();
  }
  ~RunRequest() override {
    try {
      if (cancel_ == Cancel::Never)
        run_->wait(Endpoint::Clock::time_point::max());  // its deadline bounds it
      else
        cancel();
    } catch (...) {
    }
  }

  bool test() override {
    if (!run_->test()) return false;
    if (auto e = run_->error()) std::rethrow_exception(e);
    return true;
  }

  // Past `timeout` (0: the communicator's) it fails with Timeout, as a blocking call.
  void wait(std::chrono::milliseconds timeout) override {
    const std::string& where = run_->call.where;
    const auto until = ::tether::detail::core::waitDeadline(
        endpoint_.rank(), [&] { return where; }, timeout, endpoint_.timeout());
    if (auto e = run_->wait(until)) std::rethrow_exception(e);
  }

  // True if the call ended because of it.
  bool cancel() override {
    if (cancel_ == Cancel::Never) return false;
    const std::string what = failures::failure(endpoint_.who(), run_->call.where, failures::cancelledOnThisRank());
    if (!run_->cancel(std::make_exception_ptr(Error(ErrorCode::Aborted, what, endpoint_.rank(), -1)))) return false;
    // Peers have started it too and wait for steps this rank will not send.
    if (cancel_ == Cancel::FailAndAbortWorld) endpoint_.world()->abortAll(endpoint_.worldRank(), what);
    return true;
  }

 private:
  const std::shared_ptr<const void> owner_;
  const Endpoint& endpoint_;
  const std::shared_ptr<Run> run_;
  const Cancel cancel_;
};

}  // namespace detail
}  // namespace testing
}  // namespace tether
