// tether/testing/detail/run.hpp — one call of one rank (a send, a receive,
// a collective), run as the TCP world runs its calls (lib/core/op_run.hpp):
// a state machine, not a thread. Its steps — what it posts up to each
// settle — are the TCP world's (tether/detail/core/call_steps.hpp); it
// parks in the shared call table (CallTable::settleOrResume); the table
// wakes it once its receives are filled and its held sends delivered, and the thread that
// delivered the last of them resumes it before it lets go of the world mutex
// (WorldState::drainLocked). So a nonblocking call needs no thread, and a
// rank's calls progress whether or not its caller waits. A caller that waits
// or tests fails the run at its deadline, on an abort, or when the peer it
// waits for has left. Header-only, C++17.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tether/detail/core/call_table.hpp"
#include "tether/detail/core/call_steps.hpp"
#include "tether/error.hpp"
#include "tether/testing/detail/endpoint.hpp"

namespace tether {
namespace testing {
namespace detail {

class Run final : public ::tether::detail::core::Resumable, public Expiring {
 public:
  using Clock = Endpoint::Clock;
  using Steps = ::tether::detail::core::CallSteps<InProcessCalls, Run>;
  // Told of a collective's failure under the world mutex: the bootstrap
  // marks its communicator broken and may abort the world.
  using Failed = std::function<void(std::exception_ptr)>;

  explicit Run(const Endpoint& endpoint) : endpoint_(endpoint) {}
  // One that did not end (a collective that never started; one whose
  // request could not be cancelled) leaves nothing behind: not its
  // receives, its held sends, its place in the call table or its sequence.
  ~Run() {
    Endpoint::Locked lock(*endpoint_.world_);
    if (done_) return;
    deadline.unlink();  // from the world's deadlines
    letGo();
    call.resumer = nullptr;
    endpoint_.endLocked(call, nullptr);
  }
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

  Call call;                        // its receives (and a collective's sequence entry) point to it
  std::vector<unsigned char> keep;  // an in-place all-to-all's blocks to send
  // What it posts (call_steps.hpp): set before it starts; a collective's
  // plan before the call takes its id (so bad settings throw first).
  Steps steps;

  // Starts the call (its deadline the communicator's timeout from now) and
  // takes it as far as it goes now; an abort throws first. A collective
  // replays its plan over `group` (plan rank -> world rank); `failed` is
  // told of its failure.
  void start(std::vector<int> group = {}, Failed failed = nullptr) {
    Endpoint::Locked lock(*endpoint_.world_);
    until_ = endpoint_.deadline();
    endpoint_.throwIfAbortedLocked(call.where);
    endpoint_.table().add(call);
    group_ = std::move(group);
    failed_ = std::move(failed);
    steps.begin(call, *this, group_, endpoint_.world_->maxPayload);
    resume(call.error);  // failed as it began: a frame of another operation came first
  }

  // Waits until it ended; at `until` (or its deadline) fails it. (An abort,
  // or the peer it waits for leaving, fails it at once: WorldState.) Its
  // error, or null.
  std::exception_ptr wait(Clock::time_point until) {
    Endpoint::Locked lock(*endpoint_.world_);
    if (!done_) {
      try {
        endpoint_.waitLocked(
            lock.lock(), std::min(until, until_), call.where, [&] { return peer(); }, [&] { return waitingText(); },
            [&] { return done_; });
      } catch (...) {
        fail(std::current_exception());
      }
    }
    return error_;
  }

  // A look without waiting (Request::test): fails it as wait() would. True once it ended.
  bool test() {
    Endpoint::Locked lock(*endpoint_.world_);
    if (done_) return true;
    try {
      throwIfExpired();
    } catch (...) {
      fail(std::current_exception());
    }
    return done_;
  }

  // A request's: it fails at its deadline even if nobody waits for it or
  // tests it, as over TCP (WorldState's timer thread).
  void watchDeadline() {
    Endpoint::Locked lock(*endpoint_.world_);
    if (!done_ && !deadline.linked()) endpoint_.world_->watchLocked(*this, until_);
  }

  // Fails it with `e` unless it ended already; true if it ended with `e`.
  bool cancel(const std::exception_ptr& e) {
    Endpoint::Locked lock(*endpoint_.world_);
    if (done_) return false;
    fail(e);
    return error_ == e;
  }
  std::exception_ptr error() const {
    Endpoint::Locked lock(*endpoint_.world_);
    return error_;
  }
  bool done() const {
    Endpoint::Locked lock(*endpoint_.world_);
    return done_;
  }

  // ---- under the world mutex ----

  void expireLocked() override {
    if (done_) return;
    try {
      throwIfExpired();  // the thread calls at or after until_
    } catch (...) {
      fail(std::current_exception());
    }
  }

  // The call table's: what it waited for is done (or `e` failed it).
  void resume(std::exception_ptr e) override {
    if (done_) return;
    if (e || steps.advance(endpoint_.table(), *this, e)) finish(e);  // else resumed when the wait is over
  }

  // The steps' wire (call_steps.hpp).
  // A frame to world rank `to`: delivered now, or held by its window (copied)
  // and counted until delivered. To a rank that has left, the call fails
  // (PeerLost), as over TCP, where its link is gone.
  void sendFrame(Call&, int to, const Header& header, const void* data, bool /*reference: copied if held*/) {
    if (endpoint_.world_->left[static_cast<std::size_t>(to)])
      return endpoint_.table().failCall(call, std::make_exception_ptr(endpoint_.leftError(call.where, to)));
    endpoint_.world_->sendLocked(endpoint_.worldRank(), to, header, data, call);
  }
  // Takes a message that came first, or posts the receive (sizes differ:
  // throws; its sender has left, so that nothing more comes: throws PeerLost).
  void postRecv(Call&, const Key& k, void* data, std::size_t bytes) {
    CallTable& table = endpoint_.table();
    if (table.takeStashed(call, k, data, bytes)) return;
    if (endpoint_.world_->left[k.src]) throw endpoint_.leftError(call.where, static_cast<int>(k.src));
    table.post(call, k, data, bytes);
  }

 private:
  // Ends the run with `e` through the call table (it waits there), at once.
  void fail(const std::exception_ptr& e) {
    if (done_) return;
    endpoint_.table().failCall(call, e);
    endpoint_.world_->drainLocked();
    if (!done_) finish(call.error ? call.error : e);  // it was not waiting (cannot happen; never left hanging)
  }

  // It ended: nothing of it stays posted or held, a collective leaves its
  // sequence (a message left at its id fails one that returned), and its
  // caller is woken.
  void finish(std::exception_ptr e) {
    deadline.unlink();  // from the world's deadlines
    letGo();
    endpoint_.endLocked(call, &e);
    steps.end();
    done_ = true;
    error_ = e;
    if (e && failed_) failed_(e);
    endpoint_.mailbox().wake.notify_all();
  }

  // Past its deadline: the Timeout naming what it waits for.
  void throwIfExpired() const {
    if (Clock::now() >= until_)
      endpoint_.fail(ErrorCode::Timeout, call.where, peer(), failures::timedOut(waitingText()));
  }

  // Leaves the calls in flight, withdraws its receives and drops the sends
  // its window holds (never delivered now).
  void letGo() {
    endpoint_.table().remove(call);
    endpoint_.table().withdraw(call);
    endpoint_.mailbox().windows.drop(&call);
  }

  // The peer it waits for, and what for: a receive's sender, else a held send's.
  int peer() const {
    const int from = CallTable::waitsOn(call, [&] { return endpoint_.mailbox().windows.heldPeer(&call); });
    return from >= 0 ? endpoint_.names().rankOf(from) : -1;
  }
  std::string waitingText() const {
    const SendWindows& windows = endpoint_.mailbox().windows;
    return CallTable::pendingText(
        call, [&](int rank) { return endpoint_.names().nameOfWorld(rank); }, [&] { return windows.heldPeer(&call); },
        [&] { return windows.heldNote(&call); });
  }

  const Endpoint& endpoint_;
  std::vector<int> group_;  // plan rank -> world rank
  Failed failed_;
  Clock::time_point until_{};
  bool done_ = false;
  std::exception_ptr error_;
};

}  // namespace detail
}  // namespace testing
}  // namespace tether
