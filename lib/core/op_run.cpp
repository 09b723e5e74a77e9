// OpRun (op_run.hpp): a run's start, waits and end.
#include "core/op_run.hpp"

#include <utility>

#include "core/calls.hpp"

namespace tether {

void OpRun::launch(Calls& calls, std::shared_ptr<Op> op, std::shared_ptr<Completion> done,
                   std::shared_ptr<OpRun> self) {
  calls_ = &calls;
  op_ = std::move(op);
  done_ = std::move(done);
  begun_ = false;
  busy_.store(true, std::memory_order_relaxed);
  self_ = std::move(self);
  try {
    calls_->startRun(*op_, *this, slot_);
  } catch (...) {
    op_->self.reset();  // a request's op never started: nothing holds its lease now
    op_.reset();
    done_.reset();
    busy_.store(false, std::memory_order_release);
    self_.reset();  // the caller holds another reference
    throw;
  }
}

void OpRun::resume(std::exception_ptr e) {
  if (!begun_) {
    begun_ = true;
    if (e) {  // the world aborted before the op was registered
      op_->self.reset();
      auto done = std::move(done_);
      op_.reset();
      ended();
      auto self = std::move(self_);
      busy_.store(false, std::memory_order_release);
      done->complete(e);
      return;
    }
    try {
      begin();
    } catch (...) {
      return finish(std::current_exception());
    }
    return step();
  }
  if (e) return finish(e);
  step();
}

void OpRun::step() {
  try {
    while (next())
      if (!calls_->settleOrResume(*op_, *this)) return;  // resume() goes on
  } catch (...) {
    return finish(std::current_exception());
  }
  finish(nullptr);
}

void OpRun::finish(std::exception_ptr e) {
  ended();
  Calls* calls = calls_;
  auto op = std::move(op_);
  auto done = std::move(done_);
  auto self = std::move(self_);
  busy_.store(false, std::memory_order_release);
  calls->finishOp(*op, e, done);
}

}  // namespace tether
