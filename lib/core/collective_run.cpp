#include "core/collective_run.hpp"

#include <utility>

#include "core/calls.hpp"
#include "core/world.hpp"

namespace tether {

void CollectiveRun::start(World& w, const std::vector<int>& worldRanks, std::shared_ptr<Op> op,
                          std::shared_ptr<Completion> done) {
  maxPayload_ = w.config().maxPayload;
  worldRanks_ = &worldRanks;
  launch(w.calls(), std::move(op), std::move(done), shared_from_this());
}

void CollectiveRun::begin() {
  calls_->beginCollective(*op_->seq, *op_);
  steps_.begin(*op_, *calls_, *worldRanks_, maxPayload_);
}

bool CollectiveRun::next() { return steps_.next(); }

}  // namespace tether
