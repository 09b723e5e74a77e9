// tether/detail/coll/execute.hpp — the plan executor: replays a recorded
// Plan (plan.hpp) over a world's transport, written once for every world.
// A transport is any object with
//   postSend(int peer, std::uint32_t step, const void* data, std::size_t bytes)
//   postRecv(int peer, std::uint32_t step, void* data, std::size_t bytes)
// (peers are ranks of the plan's group; buffers stay valid until the next
// settle); the world settles between rounds in its own way: the TCP world
// steps as a state machine (lib/core/collective_run.cpp), the testing world blocks:
//   Execution run(std::move(plan), in, out);
//   while (run.next(transport)) transport.settle();
// Header-only, C++17.
#pragma once

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "tether/detail/coll/plan.hpp"

namespace tether {
namespace detail {
namespace coll {

class Execution {
 public:
  // `in` is the caller's send data (may equal `out`), `out` its receive
  // buffer; scratch memory is owned here (not zeroed: a plan reads only
  // scratch it has written).
  Execution(Plan plan, const void* in, void* out)
      : plan_(std::move(plan)),
        steps_(&plan_.steps()),
        scratch_(plan_.scratchBytes() ? new unsigned char[plan_.scratchBytes()] : nullptr),
        mem_{static_cast<const unsigned char*>(in), static_cast<unsigned char*>(out), scratch_.get()} {}
  // Replays a plan kept by the caller (a cache of recorded plans) with the
  // caller's scratch memory (at least the plan's scratchBytes()); both stay
  // valid until the replay ends. `steps`: the plan's steps().
  Execution(const std::vector<Step>& steps, const void* in, void* out, unsigned char* scratch)
      : plan_(0, 1), steps_(&steps), mem_{static_cast<const unsigned char*>(in), static_cast<unsigned char*>(out), scratch} {}
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
  Plan plan_;
  const std::vector<Step>* steps_;
  std::unique_ptr<unsigned char[]> scratch_;
  Memory mem_;
  std::size_t at_ = 0;
};

}  // namespace coll
}  // namespace detail
}  // namespace tether
