// tether/detail/core/collective_steps.hpp — a collective call's steps, the
// part of its run every world shares: its plan (recorded, or found among the
// kept ones, plan_cache.hpp), the replay of that plan (execute.hpp), and what
// each step puts on the wire — a frame to a world rank, in parts past
// TETHER_MAX_PAYLOAD_BYTES, or a receive under each part's key
// (frame_calls.hpp). A world's run owns one and moves its frames through its
// `Wire`, an object with
//   sendFrame(Call&, int worldRank, const wire::FrameHeader&, const void* data, bool reference)
//   postRecv(Call&, const match::Key&, void* data, std::size_t bytes)
// (`reference`: the data stays valid until the step settles, so a world may
// send it without a copy): lib/core's Calls (collective_run.cpp) and the
// testing world's Run (tether/testing/detail/run.hpp). Header-only, C++17.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "tether/detail/coll/execute.hpp"
#include "tether/detail/coll/plan_cache.hpp"
#include "tether/detail/coll/table.hpp"
#include "tether/detail/wire/frame.hpp"

namespace tether {
namespace detail {
namespace core {

// `Calls`: a world's FrameCalls (frame_calls.hpp); `Wire`: as above.
template <class Calls, class Wire>
class CollectiveSteps {
 public:
  using Call = typename Calls::Call;

  // Before the call starts: `algo`'s plan for `args` on `shape`, recorded (an
  // all-to-all(v)'s counts are read now) or found; it will replay from `in`
  // (the caller's send data; may equal `out`) into `out`.
  void prepare(const coll::Algorithm& algo, const coll::Shape& shape, const coll::Call& args, const void* in,
               void* out) {
    steps_ = &plans_.steps(algo, shape, args);
    in_ = in;
    out_ = out;
  }
  // `call` begins: it replays over `worldRanks` (plan rank -> world rank),
  // its frames at most `maxPayload` bytes each, through `wire`; all valid
  // until it ends.
  void begin(Call& call, Wire& wire, const std::vector<int>& worldRanks, std::uint64_t maxPayload) {
    call_ = &call;
    wire_ = &wire;
    worldRanks_ = &worldRanks;
    maxPayload_ = maxPayload < 1 ? 1 : maxPayload;
    exec_.emplace(*steps_, in_, out_, plans_.scratch());
  }
  // Posts the steps up to the next settle; false once the plan is done.
  // Throws as partsOf (a frame of too many parts) and the wire do.
  bool next() { return exec_->next(*this); }
  // The call ended: nothing of it is replayed any more.
  void end() { exec_.reset(); }
  bool running() const { return exec_.has_value(); }

  // The plan executor's transport (execute.hpp).
  void postSend(int peer, std::uint32_t step, const void* data, std::size_t bytes) {
    const int to = (*worldRanks_)[static_cast<std::size_t>(peer)];
    const auto* at = static_cast<const unsigned char*>(data);
    const typename Calls::Parts parts = Calls::partsOf(*call_, bytes, maxPayload_);
    for (std::uint64_t i = 0; i < parts.count; ++i)
      wire_->sendFrame(*call_, to, Calls::collectiveFrame(*call_, step, i, parts.length(i)), at + parts.offset(i),
                       /*reference=*/true);
  }
  void postRecv(int peer, std::uint32_t step, void* data, std::size_t bytes) {
    const int from = (*worldRanks_)[static_cast<std::size_t>(peer)];
    auto* at = static_cast<unsigned char*>(data);
    const typename Calls::Parts parts = Calls::partsOf(*call_, bytes, maxPayload_);
    for (std::uint64_t i = 0; i < parts.count; ++i)
      wire_->postRecv(*call_, Calls::collectiveKey(*call_, from, step, i), at + parts.offset(i),
                      static_cast<std::size_t>(parts.length(i)));
  }

 private:
  coll::PlanCache plans_;  // the plans of its last kinds of call, and the scratch memory they replay with
  const std::vector<coll::Step>* steps_ = nullptr;
  const void* in_ = nullptr;
  void* out_ = nullptr;
  Call* call_ = nullptr;
  Wire* wire_ = nullptr;
  const std::vector<int>* worldRanks_ = nullptr;
  std::uint64_t maxPayload_ = 1;
  std::optional<coll::Execution> exec_;
};

// What a collective's frames carry as its root: a broadcast's root (ranks
// that disagree on it fail with Protocol, never take each other's payload),
// else wire::kNoRoot.
inline std::uint32_t rootOnWire(const coll::Call& args) {
  return args.op == coll::Op::Broadcast ? static_cast<std::uint32_t>(args.root) : wire::kNoRoot;
}

}  // namespace core
}  // namespace detail
}  // namespace tether
