// tether/testing/detail/collective_run.hpp — one collective call of one rank,
// run as the TCP world runs it (lib/core/op_run.hpp): a state machine, not a
// thread. Its plan's sends and receives are posted up to each settle; the
// shared call table (CallTable::settleOrResume, wake, resumeWoken) resumes it
// once the round's receives are filled and its held sends delivered — on
// whichever thread delivered the last of them, under the world mutex
// (WorldState::drainLocked). So a nonblocking collective needs no thread, and
// a rank's collective progresses whether or not its caller waits. A caller
// that waits, or tests, fails the run at its deadline, on an abort, or when
// the peer it waits for has left. Header-only, C++17.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tether/detail/coll/execute.hpp"
#include "tether/detail/core/call_table.hpp"
#include "tether/error.hpp"
#include "tether/testing/detail/endpoint.hpp"

namespace tether {
namespace testing {
namespace detail {

class CollectiveRun final : public ::tether::detail::core::Resumable {
 public:
  using Clock = Endpoint::Clock;
  using Plan = ::tether::detail::coll::Plan;
  // Told of the run's failure under the world mutex: the bootstrap marks its
  // communicator broken and may abort the world.
  using Failed = std::function<void(std::exception_ptr)>;

  explicit CollectiveRun(const Endpoint& endpoint) : endpoint_(endpoint) {}
  // One that never started leaves its communicator's sequence.
  ~CollectiveRun() { endpoint_.end(call, nullptr); }
  CollectiveRun(const CollectiveRun&) = delete;
  CollectiveRun& operator=(const CollectiveRun&) = delete;

  Plan plan{0, 1};                  // recorded before it starts
  ChannelKey key;                   // its call id: communicator, id, operation, root
  Call call;                        // its receives and its sequence entry point to it
  std::vector<unsigned char> keep;  // an in-place all-to-all's blocks to send

  // Replays the plan over `group` (plan rank -> communicator rank) from `in`
  // into `out`, as far as it goes now; its deadline is the communicator's
  // timeout from now.
  void start(std::vector<int> group, const void* in, void* out, Failed failed) {
    Endpoint::Locked lock(*endpoint_.world_);
    group_ = std::move(group);
    failed_ = std::move(failed);
    until_ = endpoint_.deadline();
    exec_.emplace(std::move(plan), in, out);
    resume(call.error);  // failed as it began: a frame of another operation came first
  }

  // Waits until it ended; at `until` (or its deadline), an abort, or the
  // peer it waits for leaving, fails it. Its error, or null.
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
      endpoint_.throwIfAbortedLocked(call.where);
      endpoint_.throwIfLeftLocked(call.where, peer());
      if (Clock::now() >= until_)
        endpoint_.fail(ErrorCode::Timeout, call.where, peer(), failures::timedOut(waitingText()));
    } catch (...) {
      fail(std::current_exception());
    }
    return done_;
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

  // ---- under the world mutex ----

  // The call table's: the round it waited for is done (or `e` failed it).
  void resume(std::exception_ptr e) override {
    if (e) return finish(e);
    try {
      endpoint_.throwIfAbortedLocked(call.where);
      while (exec_->next(*this))
        if (!endpoint_.table().settleOrResume(call, *this)) return;  // resumed when the round is done
    } catch (...) {
      return finish(std::current_exception());
    }
    finish(nullptr);
  }

  // The plan executor's transport (tether/detail/coll/execute.hpp): a send
  // is delivered now, or held by its window and counted until delivered; a
  // receive takes a message that came first, or is posted for the next.
  void postSend(int peer, std::uint32_t step, const void* data, std::size_t bytes) {
    Header header;
    header.key = key;
    header.key.step = step;
    header.key.source = endpoint_.rank();
    header.length = bytes;
    const int to = group_[static_cast<std::size_t>(peer)];
    const ChannelKey sentKey = header.key;
    auto slot = endpoint_.world_->sendLocked(endpoint_.worldRank(), endpoint_.worldRankOf(to), std::move(header), data);
    if (!slot) return;
    held_.erase(std::remove_if(held_.begin(), held_.end(), [](const Endpoint::Sent& s) { return s.slot->done; }),
                held_.end());
    slot->call = &call;
    ++call.outstanding;
    held_.push_back(Endpoint::Sent{std::move(slot), to, sentKey});
  }
  void postRecv(int peer, std::uint32_t step, void* data, std::size_t bytes) {
    ChannelKey k = key;
    k.step = step;
    k.source = group_[static_cast<std::size_t>(peer)];
    CallTable& table = endpoint_.table();
    if (!table.takeStashed(call, k, data, bytes)) table.post(call, k, data, bytes);
  }

 private:
  // Ends the run with `e` through the call table (it is waiting there), at once.
  void fail(const std::exception_ptr& e) {
    if (done_) return;
    endpoint_.table().failCall(call, e);
    endpoint_.world_->drainLocked();
    if (!done_) finish(call.error ? call.error : e);  // it was not waiting (cannot happen; never left hanging)
  }

  // It ended: nothing of it stays posted or held, it leaves its sequence (a
  // message left at its id fails one that returned), and its caller is woken.
  void finish(std::exception_ptr e) {
    endpoint_.table().withdraw(call);
    for (const Endpoint::Sent& s : held_)
      if (!s.slot->done) endpoint_.world_->dropLocked(s.slot);
    held_.clear();
    endpoint_.endLocked(call, &e);
    exec_.reset();
    done_ = true;
    error_ = e;
    if (e && failed_) failed_(e);
    endpoint_.mailbox().wake.notify_all();
  }

  // The peer it waits for, and what for: a receive's sender, else a held send's.
  const Endpoint::Sent* heldSend() const {
    for (const Endpoint::Sent& s : held_)
      if (!s.slot->done) return &s;
    return nullptr;
  }
  int peer() const {
    const int from = CallTable::waitedPeer(call);
    if (from >= 0) return from;
    const Endpoint::Sent* held = heldSend();
    return held ? held->peer : -1;
  }
  std::string waitingText() const {
    std::string text = CallTable::waitingText(call, failures::rankName);
    if (text.empty()) {
      if (const Endpoint::Sent* held = heldSend()) text = endpoint_.heldText(*held);
    }
    return text.empty() ? "before completing" : text;
  }

  const Endpoint& endpoint_;
  std::vector<int> group_;
  Failed failed_;
  Clock::time_point until_{};
  std::optional<::tether::detail::coll::Execution> exec_;
  std::vector<Endpoint::Sent> held_;  // sends its window held (copied), until delivered
  bool done_ = false;
  std::exception_ptr error_;
};

}  // namespace detail
}  // namespace testing
}  // namespace tether
