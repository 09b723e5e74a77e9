// tether/detail/coll/plan_cache.hpp — the recorded plans a run replays, in
// every world: the plans of the last kPlans kinds of call (algorithm, shape,
// operation, size, root), so that calls that alternate (an all-gather and a
// barrier) each find theirs, and the scratch memory the largest needs. An
// all-to-all(v)'s plan is recorded each call (its arrays may change) and never
// found. A plan found here is valid until the next steps(). Header-only, C++17.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "tether/detail/coll/plan.hpp"
#include "tether/detail/coll/table.hpp"

namespace tether {
namespace detail {
namespace coll {

class PlanCache {
 public:
  // The steps of `call` with `algo` on `shape`: a kept plan, or one recorded
  // into the least recently used entry; scratch() is then large enough for it.
  const std::vector<Step>& steps(const Algorithm& algo, const Shape& shape, const Call& call) {
    ++uses_;
    if (!call.blocks.sendCounts)
      for (Entry& e : entries_)
        if (e.plan && !e.call.blocks.sendCounts && e.algo == &algo && sameShape(e.shape, shape) &&
            e.call.op == call.op && e.call.bytes == call.bytes && e.call.root == call.root) {
          e.lastUse = uses_;
          return e.plan->steps();
        }
    Entry& e = *std::min_element(entries_.begin(), entries_.end(),
                                 [](const Entry& a, const Entry& b) { return a.lastUse < b.lastUse; });
    e.plan.reset();
    e.plan.emplace(record(algo, shape, call));
    e.algo = &algo;
    e.shape = shape;
    e.call = call;
    e.lastUse = uses_;
    if (scratch_.size() < e.plan->scratchBytes()) scratch_.resize(e.plan->scratchBytes());
    return e.plan->steps();
  }
  unsigned char* scratch() { return scratch_.data(); }

 private:
  static bool sameShape(const Shape& a, const Shape& b) {
    return a.rank == b.rank && a.size == b.size && a.cpuBound == b.cpuBound && a.radix == b.radix &&
           a.largeBytes == b.largeBytes && a.chunk == b.chunk;
  }

  struct Entry {
    const Algorithm* algo = nullptr;
    Shape shape;
    Call call;
    std::optional<Plan> plan;
    std::uint64_t lastUse = 0;
  };
  static constexpr std::size_t kPlans = 4;
  std::array<Entry, kPlans> entries_;
  std::uint64_t uses_ = 0;
  std::vector<unsigned char> scratch_;  // the largest any of them needs
};

}  // namespace coll
}  // namespace detail
}  // namespace tether
