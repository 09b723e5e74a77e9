// tether/detail/coll/execute.hpp — the plan executor: replays a recorded
// Plan (plan.hpp) over a world's transport, written once for every world.
// A transport is any object with
//   postSend(int peer, std::uint32_t step, const void* data, std::size_t bytes)
//   postRecv(int peer, std::uint32_t step, void* data, std::size_t bytes)
// (peers are ranks of the plan's group; buffers stay valid until the next
// settle); the world settles between rounds in its own way: the TCP world
// co_awaits (lib/coll/execute.cpp), the testing world blocks:
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
        scratch_(new unsigned char[plan_.scratchBytes()]),
        mem_{static_cast<const unsigned char*>(in), static_cast<unsigned char*>(out), scratch_.get()} {}

  // Posts the steps up to the next settle over `t` (sends, receives, local
  // copies, in plan order). True: the caller settles, then calls again;
  // false: the plan is done.
  template <class Transport>
  bool next(Transport& t) {
    const std::vector<Step>& steps = plan_.steps();
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
  std::unique_ptr<unsigned char[]> scratch_;
  Memory mem_;
  std::size_t at_ = 0;
};

}  // namespace coll
}  // namespace detail
}  // namespace tether
