// One collective call driven without a coroutine (OpRun): the plan's steps
// are posted up to each settle. A communicator keeps one run and reuses it
// call after call (its Op and Completion leased from the communicator's
// ReusedCall), with the recorded plans (cached per algorithm, shape and size)
// and the scratch memory, so a steady-state call allocates none of them. The
// steps — plan, replay, frames in parts — are the shared
// tether/detail/core/collective_steps.hpp's, moved by Calls.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/layer.hpp"
#include "core/op_run.hpp"
#include "core/sequence_guard.hpp"
#include "tether/detail/coll/table.hpp"
#include "tether/detail/core/collective_steps.hpp"

TETHER_LAYER(6, "core");

namespace tether {

class World;

class CollectiveRun final : public OpRun, public std::enable_shared_from_this<CollectiveRun> {
 public:
  // On the calling thread, while idle() and before the call takes its id:
  // `algo`'s plan for `call` on `shape` (an all-to-all(v)'s counts are read
  // now), replayed from `in` into `out`.
  void prepare(const detail::coll::Algorithm& algo, const detail::coll::Shape& shape, const detail::coll::Call& call,
               const void* in, void* out) {
    steps_.prepare(algo, shape, call, in, out);
  }
  // Starts `op` (a collective over `worldRanks`, plan rank -> world rank;
  // registered by the caller; its root as its frames carry it set) on the
  // progress thread; `done` completes when it ends. Throws as
  // Calls::startRun does.
  void start(World& w, const std::vector<int>& worldRanks, std::shared_ptr<Op> op, std::shared_ptr<Completion> done);

 private:
  // Sequences the collective and starts replaying its plan.
  void begin() override;
  bool next() override;
  void ended() override { steps_.end(); }

  std::uint64_t maxPayload_ = 1;  // w.config().maxPayload: larger frames are sent in parts
  const std::vector<int>* worldRanks_ = nullptr;
  detail::core::CollectiveSteps<TcpCalls, Calls> steps_;
};

}  // namespace tether
