// OpRun (op_run.hpp): a run's start, waits and end.
#include "core/op_run.hpp"

#include <utility>

#include "core/calls.hpp"

namespace tether {

namespace {
const std::vector<int> kNoRanks;
}  // namespace

void OpRun::startSend(Calls& calls, std::shared_ptr<Op> op, std::shared_ptr<Completion> done, int dst,
                      const wire::FrameHeader& h, const void* data) {
  steps_.send(dst, h, data);
  worldRanks_ = &kNoRanks;
  launch(calls, std::move(op), std::move(done));
}

void OpRun::startRecv(Calls& calls, std::shared_ptr<Op> op, std::shared_ptr<Completion> done, const match::Key& key,
                      void* data, std::size_t bytes) {
  steps_.recv(key, data, bytes);
  worldRanks_ = &kNoRanks;
  launch(calls, std::move(op), std::move(done));
}

void OpRun::startCollective(Calls& calls, const std::vector<int>& worldRanks, std::uint64_t maxPayload,
                            std::shared_ptr<Op> op, std::shared_ptr<Completion> done) {
  worldRanks_ = &worldRanks;
  maxPayload_ = maxPayload;
  launch(calls, std::move(op), std::move(done));
}

void OpRun::launch(Calls& calls, std::shared_ptr<Op> op, std::shared_ptr<Completion> done) {
  calls_ = &calls;
  op_ = std::move(op);
  done_ = std::move(done);
  begun_ = false;
  busy_.store(true, std::memory_order_relaxed);
  self_ = shared_from_this();
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
      auto self = std::move(self_);
      busy_.store(false, std::memory_order_release);
      done->complete(e);
      return;
    }
    try {
      if (steps_.collective()) calls_->beginCollective(*op_->seq, *op_);
      steps_.begin(*op_, *calls_, *worldRanks_, maxPayload_);
    } catch (...) {
      return finish(std::current_exception());
    }
    return step();
  }
  if (e) return finish(e);
  step();
}

void OpRun::step() {
  std::exception_ptr e;
  if (steps_.advance(*calls_, *this, e)) finish(e);  // else resume() goes on
}

void OpRun::finish(std::exception_ptr e) {
  steps_.end();
  Calls* calls = calls_;
  auto op = std::move(op_);
  auto done = std::move(done_);
  auto self = std::move(self_);
  busy_.store(false, std::memory_order_release);
  calls->finishOp(*op, e, done);
}

}  // namespace tether
