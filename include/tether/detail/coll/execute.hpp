// tether/detail/coll/execute.hpp — the plan executor: replays a recorded
// Plan (plan.hpp) over a world's transport, written once for every world.
// A transport is any object with
//   postSend(int peer, std::uint32_t step, const void* data, std::size_t bytes)
//   postRecv(int peer, std::uint32_t step, void* data, std::size_t bytes)
// (peers are ranks of the plan's group; buffers stay valid until the next
// settle); between rounds the world settles, both worlds as a state machine
// that posts up to a settle and is resumed when it is done
// (lib/core/collective_run.cpp, tether/testing/detail/run.hpp):
//   Execution run(cache.steps(algo, shape, call), in, out, cache.scratch());
//   while (run.next(transport)) settle();
// Header-only, C++17.
#pragma once

#include <cstddef>
#include <vector>

#include "tether/detail/coll/plan.hpp"

namespace tether {
namespace detail {
namespace coll {

class Execution {
 public:
  // Replays `steps` (a recorded plan's, plan_cache.hpp) from `in`, the
  // caller's send data (may equal `out`), into `out`, its receive buffer,
  // with `scratch` memory (at least the plan's scratchBytes(); not zeroed: a
  // plan reads only scratch it has written); all stay valid until the replay
  // ends.
  Execution(const std::vector<Step>& steps, const void* in, void* out, unsigned char* scratch)
      : steps_(&steps), mem_{static_cast<const unsigned char*>(in), static_cast<unsigned char*>(out), scratch} {}
  Execution(const Execution&) = delete;
  Execution& operator=(const Execution&) = delete;

  // Posts the steps up to the next settle over `t` (sends, receives, local
  // copies, in plan order). True: the caller settles, then calls again;
  // false: the plan is done.
  template <class Transport>
  bool next(Transport& t) {
    const std::vector<Step>& steps = *steps_;
    while (at_ < steps.size()) {
      const Step& s = steps[at_++];
      switch (s.kind) {
        case Step::Kind::Send:
          t.postSend(s.peer, s.step, mem_.at(s.at), s.bytes);
          break;
        case Step::Kind::Recv:
          t.postRecv(s.peer, s.step, mem_.at(s.at), s.bytes);
          break;
        case Step::Kind::Copy:
        case Step::Kind::CopyBlocks:
          mem_.copy(s);
          break;
        case Step::Kind::Settle:
          return true;
      }
    }
    return false;
  }

 private:
  const std::vector<Step>* steps_;
  Memory mem_;
  std::size_t at_ = 0;
};

}  // namespace coll
}  // namespace detail
}  // namespace tether
