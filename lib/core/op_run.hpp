// One call's operation driven on the progress thread without a coroutine:
// a collective (CollectiveRun) or a send or a receive (PointRun). The run
// posts its frames and receives up to a wait (OpTable::settleOrResume), is
// resumed when the wait ends (OpTable::wake, then resumeWoken between
// handlers), and ends the op at its end. A communicator keeps its runs and
// reuses them call after call, so a steady-state call allocates no run, no
// coroutine frame and no posted handler (its post's memory is the run's).
//
// This base does what every run does: start, stay alive until the call ends,
// wait, finish. A derived run says what to post (begin, next) and what to
// drop when the call ends (ended).
#pragma once

#include <atomic>
#include <exception>
#include <memory>

#include "base/layer.hpp"
#include "core/completion.hpp"
#include "core/op.hpp"
#include "core/post_slot.hpp"

TETHER_LAYER(6, "core");

namespace tether {

class Calls;

class OpRun : public Resumable {
 public:
  // Idle: its last call has ended (it may start the next). Any thread.
  bool idle() const { return !busy_.load(std::memory_order_acquire); }

  void resume(std::exception_ptr e) final;

 protected:
  OpRun() = default;
  ~OpRun() = default;
  OpRun(const OpRun&) = delete;
  OpRun& operator=(const OpRun&) = delete;

  // Starts `op` on the progress thread (Calls::startRun); `self`, this run,
  // is kept alive until the call ends, when `done` completes. Throws as
  // Calls::startRun does (the run is then idle again).
  void launch(Calls& calls, std::shared_ptr<Op> op, std::shared_ptr<Completion> done, std::shared_ptr<OpRun> self);

  // Progress thread. The op is registered: get ready (throw to fail it).
  virtual void begin() = 0;
  // Posts what comes next up to a wait; false when nothing is left.
  virtual bool next() = 0;
  // The call ended: let go of what points into its buffers.
  virtual void ended() {}

  Calls* calls_ = nullptr;
  std::shared_ptr<Op> op_;

 private:
  // Posts until a wait that must wait; finishes the op at the end.
  void step();
  // Releases the call's objects before its caller learns the result: the
  // caller may start the next call on this run at once.
  void finish(std::exception_ptr e);

  std::shared_ptr<Completion> done_;
  std::shared_ptr<OpRun> self_;  // alive until the call ends
  std::atomic<bool> busy_{false};
  bool begun_ = false;
  PostSlot slot_;
};

}  // namespace tether
