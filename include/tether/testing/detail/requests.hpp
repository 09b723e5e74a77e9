// tether/testing/detail/requests.hpp — the in-process world's nonblocking
// calls (tether/request.hpp): a request is a run (detail/run.hpp) that the
// peers' messages drive, as the TCP world's progress thread drives its own;
// what test(), wait(), cancel() and the destructor do is TcpBootstrap's code
// (tether/detail/core/call_request.hpp) over a handle on the run:
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
// A request not done when destroyed is cancelled (an isend waited for), so
// the caller's buffers are never touched after the destructor. Header-only, C++17.
#pragma once

#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <utility>

#include "tether/detail/core/call_request.hpp"
#include "tether/error.hpp"
#include "tether/request.hpp"
#include "tether/testing/detail/endpoint.hpp"
#include "tether/testing/detail/run.hpp"

namespace tether {
namespace testing {
namespace detail {

// A request's handle on its run (the shared CallRequest's, call_request.hpp).
struct RunHandle {
  // What cancel() does: nothing (an isend), fail the call (an irecv, a
  // collective), and then abort the world (a collective of the world).
  enum class Cancel { Never, Fail, FailAndAbortWorld };

  std::shared_ptr<const void> owner;  // keeps the endpoint alive
  const Endpoint* endpoint;
  std::shared_ptr<Run> run;
  Cancel how;

  bool done() const { return run->done(); }
  bool poll() { return run->test(); }
  void waitUntil(Endpoint::Clock::time_point until) { run->wait(until); }
  void rethrow() const {
    if (auto e = run->error()) std::rethrow_exception(e);
  }
  // True if the call ended because of it.
  bool cancel() {
    if (how == Cancel::Never) return false;
    const std::string what = failures::failure(endpoint->who(), run->call.where, failures::cancelledOnThisRank());
    if (!run->cancel(std::make_exception_ptr(Error(ErrorCode::Aborted, what, endpoint->rank(), -1)))) return false;
    // Peers have started it too and wait for steps this rank will not send.
    if (how == Cancel::FailAndAbortWorld) endpoint->world()->abortAll(endpoint->worldRank(), what);
    return true;
  }
  // An isend is waited for (its deadline bounds it); the rest cancelled.
  void drop() {
    if (how == Cancel::Never)
      run->wait(Endpoint::Clock::time_point::max());
    else
      cancel();
  }
  std::string name() const { return run->call.where; }
  int rank() const { return endpoint->rank(); }
  std::chrono::milliseconds timeout() const { return endpoint->timeout(); }
};

// Its run fails at its deadline even if nobody waits for it or tests it.
inline std::unique_ptr<Request::Impl> runRequest(RunHandle handle) {
  handle.run->watchDeadline();
  return std::make_unique<::tether::detail::core::CallRequest<RunHandle>>(std::move(handle));
}

}  // namespace detail
}  // namespace testing
}  // namespace tether
