// One collective call driven without a coroutine (OpRun): the plan's steps
// are posted up to each settle. A communicator keeps one run and reuses it
// call after call (its Op and Completion leased from the communicator's
// ReusedCall), with the recorded plans (cached per algorithm, shape and size)
// and the scratch memory, so a steady-state call allocates none of them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "base/layer.hpp"
#include "core/op_run.hpp"
#include "wire/frame.hpp"
#include "tether/detail/coll/execute.hpp"
#include "tether/detail/coll/plan_cache.hpp"
#include "tether/detail/coll/table.hpp"

TETHER_LAYER(6, "core");

namespace tether {

class World;
struct Group;

class CollectiveRun final : public OpRun, public std::enable_shared_from_this<CollectiveRun> {
 public:
  // Starts `op` (a collective of `g`, registered by the caller) running
  // `algo` for `call` on the progress thread; `done` completes when it ends.
  // `call.blocks` is copied. Throws as Calls::startRun does.
  void start(World& w, const Group& g, std::shared_ptr<Op> op, std::shared_ptr<Completion> done,
             const detail::coll::Algorithm& algo, const detail::coll::Shape& shape, const detail::coll::Call& call,
             const void* in, void* out);
  // The plan executor's transport (tether/detail/coll/execute.hpp).
  void postSend(int peer, std::uint32_t step, const void* data, std::size_t bytes);
  void postRecv(int peer, std::uint32_t step, void* data, std::size_t bytes);

 private:
  // Sequences the collective, records or finds its plan.
  void begin() override;
  bool next() override { return exec_->next(*this); }
  void ended() override { exec_.reset(); }
  // A broadcast's frames carry its root, and its receives match on it: ranks
  // that disagree on the root fail with Protocol, never take each other's payload.
  std::uint32_t rootOnWire() const {
    return call_.op == detail::coll::Op::Broadcast ? static_cast<std::uint32_t>(call_.root) : wire::kNoRoot;
  }

  std::uint64_t maxPayload_ = 1;  // w.config().maxPayload: larger frames are sent in parts
  const Group* g_ = nullptr;
  // This call's.
  const detail::coll::Algorithm* algo_ = nullptr;
  detail::coll::Shape shape_;
  detail::coll::Call call_;
  const void* in_ = nullptr;
  void* out_ = nullptr;
  std::optional<detail::coll::Execution> exec_;
  detail::coll::PlanCache plans_;  // its plans (cached per algorithm, shape and size) and scratch memory
  std::vector<std::size_t> sendCounts_, sendDispls_, recvCounts_, recvDispls_;
};

}  // namespace tether
