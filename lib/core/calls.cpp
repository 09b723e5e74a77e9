// Calls (calls.hpp): an operation's start, wait, deadline, cancel and end.
#include "core/calls.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <algorithm>

#include "tether/detail/core/failures.hpp"

namespace tether {

namespace asio = boost::asio;
namespace failures = detail::core::failures;

void Calls::failForked(std::string_view opName) const {
  throw Error(ErrorCode::InvalidArgument,
              fmt::format("rank {}: {}: the bootstrap is used in a forked child (pid {}) of the process that "
                          "created it (pid {}); a child cannot use its parent's bootstrap (it shares the parent's "
                          "connections): create a new one in the child (docs/faults.md, \"After fork\")",
                          rank(), opName, ::getpid(), creator_),
              rank());
}

void Calls::checkStart(const Op& op) const {
  checkProcess(op);
  if (p_.closed.load())
    throw Error(ErrorCode::InvalidArgument, fmt::format("{}: {}: the bootstrap was closed", op.who(), op.name()),
                op.rank());
  if (p_.abort.aborted()) {
    if (op.counters) op.counters->aborts.fetch_add(1, std::memory_order_relaxed);
    throw p_.abort.abortedError(op.name(), *op.names);
  }
}

void Calls::startRun(Op& op, Resumable& run, PostSlot& slot) {
  checkStart(op);
  op.began = Clock::now();
  // At once on this thread when no thread runs the loop (no epoll_wait(0)
  // before it, as a posted start has) and no start posted earlier waits in
  // it, else posted: starts run in the order they were called, so a send
  // never overtakes an earlier isend of the same key (a test() between them
  // could leave posted starts behind in the loop and free it).
  if (postedStarts_.load(std::memory_order_acquire) == 0) {
    if (Driver::InlineTurn turn(p_.driver); turn) {
      beginRun(op, run);
      turn.ran();
      return;
    }
  }
  postedStarts_.fetch_add(1, std::memory_order_acq_rel);
  asio::post(p_.io, asio::bind_allocator(slot.allocator(), [this, &op, &run] {
               struct Ran {
                 std::atomic<int>& n;
                 ~Ran() { n.fetch_sub(1, std::memory_order_acq_rel); }
               } ran{postedStarts_};
               beginRun(op, run);
             }));
}

void Calls::beginRun(Op& op, Resumable& run) {
  if (p_.abort.handled()) {
    if (op.counters) op.counters->aborts.fetch_add(1, std::memory_order_relaxed);
    return run.resume(std::make_exception_ptr(p_.abort.abortedError(op.name(), *op.names)));
  }
  p_.ops.add(op);
  if (op.expires != Op::Clock::time_point{}) deadlines_.add(op);
  run.resume(nullptr);
}

void Calls::finishOp(Op& op, std::exception_ptr e, const std::shared_ptr<Completion>& done) {
  endOp(op, e);
  if (op.draining > 0)  // a link still uses its buffer (Link::abandon)
    op.afterDrain = [done, e] { done->complete(e); };
  else
    done->complete(e);
}

namespace {
// The probe for who is behind: a tenth of the call's time, 0.5 s to 1 s.
std::chrono::milliseconds probeBudget(Calls::Clock::duration callTime) {
  return std::clamp(std::chrono::duration_cast<std::chrono::milliseconds>(callTime) / 10,
                    std::chrono::milliseconds(500), std::chrono::milliseconds(1000));
}
}  // namespace

void Calls::wait(const std::shared_ptr<Op>& op, Completion& done, Clock::time_point deadline) {
  checkProcess(*op);
  if (!p_.driver.waitUntil(done, deadline)) {
    const auto budget = probeBudget(deadline - op->began);
    asio::post(p_.io, [this, op, budget] { p_.probe.timeOut(op, p_.ops, p_.life.joined() && !p_.life.closing(), budget); });
    p_.driver.wait(done);
  }
  done.rethrowIfFailed();
}

void Calls::requestExpired(std::shared_ptr<Op> op) {
  const auto budget = probeBudget(op->expires - op->began);
  p_.probe.timeOut(std::move(op), p_.ops, p_.life.joined() && !p_.life.closing(), budget);
}

bool Calls::cancel(const std::shared_ptr<Op>& op) {
  checkProcess(*op);
  auto answer = std::make_shared<Completion>();
  auto cancelled = std::make_shared<bool>(false);
  asio::post(p_.io, [this, op, answer, cancelled] {
    const bool withdrawable =
        op->kind() == Op::Kind::Collective || (op->kind() == Op::Kind::Recv && !op->posted.empty());
    if (op->active && !op->error && withdrawable) {
      *cancelled = true;
      const std::string what = failures::failure(op->who(), op->name(), failures::cancelledOnThisRank());
      p_.ops.failOp(*op, std::make_exception_ptr(Error(ErrorCode::Aborted, what, op->rank())));
      // Peers already run this collective and will never get our steps: on
      // the world communicator they are told at once (as after any failed
      // collective); a child communicator's peers fail at their deadline.
      if (op->kind() == Op::Kind::Collective && op->comm == cfg_.worldId)
        abortWorld_({static_cast<std::uint32_t>(rank()), what, wire::kNoRank});
    }
    answer->complete(nullptr);
  });
  p_.driver.wait(*answer);
  return *cancelled;
}

// The op's run reached its end (e == nullptr) or failed. A run that reached
// its end has had every frame it posted delivered; a failure recorded after
// its last settle completed (an abort notice read from the same socket right
// behind its last frame, while its resumption was queued) does not undo that.
void Calls::endOp(Op& op, std::exception_ptr& e) {
  deadlines_.remove(op);
  p_.sequences.end(op, e, p_.ops.mailbox());
  if (e && op.counters) op.counters->failed(e);
  if (e && !op.error) p_.ops.failOp(op, e);  // withdraw what it still had posted
  if (e) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {  // every error of a call is one
      lastError_ = x.what();
      // A failed collective leaves its communicator unusable now, whether or
      // not its caller waits for it (a request may never be looked at).
      if (op.broken) op.broken->mark(lastError_);
    } catch (...) {
    }
  }
  // Only the world communicator: a child communicator's failure must not stop
  // ranks outside it, and point-to-point failures concern two ranks.
  if (e && op.seq && op.comm == cfg_.worldId)
    if (auto n = p_.relay.afterFailedCollective(e)) abortWorld_(*n);
  p_.ops.remove(op);
}

// ---- collective sequencing ----

void Calls::beginCollective(CollectiveSeq& seq, Op& op) {
  if (!p_.sequences.begin(seq, op)) return;
  // A member that already died (not one that said goodbye) means this
  // collective cannot complete: fail now, naming it, instead of at the deadline.
  // (Only looked for once some peer has died: the scan reads N peers' state
  // on every call, 2% of an all-gather's CPU at 256 ranks.)
  if (p_.table.diedCount() > 0)
    for (int m : op.members)
      if (m != rank() && p_.table.peer(m).gone && !p_.table.peer(m).graceful)
        return p_.ops.failOp(op, std::make_exception_ptr(p_.peers.peerGoneError(m, op)));
  p_.sequences.checkStashed(op, p_.ops.mailbox());
}

}  // namespace tether
