// One call's operation driven on the progress thread without a coroutine: a
// collective, a send or a receive. Its steps — what it posts, up to each wait
// — are the shared tether/detail/core/call_steps.hpp's (a collective's plan
// replayed, a send's frame, a receive), moved by Calls; the run posts them up to a wait
// (OpTable::settleOrResume), is resumed when the wait ends (OpTable::wake,
// then resumeWoken between handlers), and ends the op at its end. A
// communicator keeps its runs (one for its collectives, one for its sends,
// one for its receives) and reuses them call after call, with the recorded
// plans (cached per algorithm, shape and size) and scratch memory, so a
// steady-state call allocates no run, no plan, no coroutine frame and no
// posted handler (its post's memory is the run's).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <vector>

#include "base/layer.hpp"
#include "core/completion.hpp"
#include "core/op.hpp"
#include "core/post_slot.hpp"
#include "core/sequence_guard.hpp"
#include "tether/detail/coll/table.hpp"
#include "tether/detail/core/call_steps.hpp"

TETHER_LAYER(6, "core");

namespace tether {

class Calls;

class OpRun final : public Resumable, public std::enable_shared_from_this<OpRun> {
 public:
  OpRun() = default;
  OpRun(const OpRun&) = delete;
  OpRun& operator=(const OpRun&) = delete;

  // Idle: its last call has ended (it may start the next). Any thread.
  bool idle() const { return !busy_.load(std::memory_order_acquire); }

  // Each starts `op` on the progress thread (Calls::startRun); `done`
  // completes when it ends; throws as Calls::startRun does (the run is then
  // idle again). A send queues frame `h` with payload `data` (referenced)
  // to world rank `dst`; a receive posts a receive of `bytes` into `data`
  // under `key`.
  void startSend(Calls& calls, std::shared_ptr<Op> op, std::shared_ptr<Completion> done, int dst,
                 const wire::FrameHeader& h, const void* data);
  void startRecv(Calls& calls, std::shared_ptr<Op> op, std::shared_ptr<Completion> done, const match::Key& key,
                 void* data, std::size_t bytes);
  // A collective: on the calling thread, while idle() and before the call
  // takes its id, `algo`'s plan for `call` on `shape` (an all-to-all(v)'s
  // counts are read now), replayed from `in` into `out`; then started over
  // `worldRanks` (plan rank -> world rank; its op registered by the caller,
  // its root as its frames carry it set), in frames of at most `maxPayload`.
  void prepare(const detail::coll::Algorithm& algo, const detail::coll::Shape& shape, const detail::coll::Call& call,
               const void* in, void* out) {
    steps_.collective(algo, shape, call, in, out);
  }
  void startCollective(Calls& calls, const std::vector<int>& worldRanks, std::uint64_t maxPayload,
                       std::shared_ptr<Op> op, std::shared_ptr<Completion> done);

  void resume(std::exception_ptr e) override;

 private:
  // Starts the op; `self`, this run, is kept alive until the call ends.
  void launch(Calls& calls, std::shared_ptr<Op> op, std::shared_ptr<Completion> done);
  // Posts until a wait that must wait; finishes the op at the end.
  void step();
  // Releases the call's objects before its caller learns the result: the
  // caller may start the next call on this run at once.
  void finish(std::exception_ptr e);

  Calls* calls_ = nullptr;
  std::shared_ptr<Op> op_;
  std::shared_ptr<Completion> done_;
  std::shared_ptr<OpRun> self_;  // alive until the call ends
  std::atomic<bool> busy_{false};
  bool begun_ = false;
  const std::vector<int>* worldRanks_ = nullptr;  // a collective's
  std::uint64_t maxPayload_ = 1;
  detail::core::CallSteps<TcpCalls, Calls> steps_;
  PostSlot slot_;
};

}  // namespace tether
