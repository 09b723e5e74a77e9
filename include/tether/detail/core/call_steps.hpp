// tether/detail/core/call_steps.hpp — what a call posts, and how its run
// takes it from settle to settle, the same in every world: a send's one
// frame, a receive's one posted receive, or a collective's steps — its plan
// (recorded, or found among the kept ones, plan_cache.hpp), the replay of
// that plan (execute.hpp), and what each step puts on the wire: a frame to a
// world rank, in parts past TETHER_MAX_PAYLOAD_BYTES, or a receive under each
// part's key (frame_calls.hpp). Each is posted up to a settle of the shared
// call table (call_table.hpp), which resumes the run once that wait is over.
// A world's run owns one and moves its frames through its `Wire`, an object with
//   sendFrame(Call&, int worldRank, const wire::FrameHeader&, const void* data, bool reference)
//   postRecv(Call&, const match::Key&, void* data, std::size_t bytes)
// (`reference`: the data stays valid until the call ends, so a world may
// send it without a copy): lib/core's Calls (op_run.cpp) and the testing
// world's Run (tether/testing/detail/run.hpp). Header-only, C++17.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <vector>

#include "tether/detail/coll/execute.hpp"
#include "tether/detail/coll/plan_cache.hpp"
#include "tether/detail/coll/table.hpp"
#include "tether/detail/core/call_table.hpp"
#include "tether/detail/match/key.hpp"
#include "tether/detail/wire/frame.hpp"

namespace tether {
namespace detail {
namespace core {

// `Calls`: a world's FrameCalls (frame_calls.hpp); `Wire`: as above.
template <class Calls, class Wire>
class CallSteps {
 public:
  using Call = typename Calls::Call;

  // Before the call starts, what it posts: one frame `h` with `data` to world
  // rank `to` ...
  void send(int to, const wire::FrameHeader& h, const void* data) {
    kind_ = Kind::Send;
    to_ = to;
    header_ = h;
    in_ = data;
  }
  // ... one receive of `bytes` into `data` under `key` ...
  void recv(const match::Key& key, void* data, std::size_t bytes) {
    kind_ = Kind::Recv;
    key_ = key;
    out_ = data;
    bytes_ = bytes;
  }
  // ... or `algo`'s plan for `args` on `shape`, recorded (an all-to-all(v)'s
  // counts are read now) or found, to replay from `in` (the caller's send
  // data; may equal `out`) into `out`: before the call takes its id.
  void collective(const coll::Algorithm& algo, const coll::Shape& shape, const coll::Call& args, const void* in,
                  void* out) {
    kind_ = Kind::Collective;
    steps_ = &plans_.steps(algo, shape, args);
    in_ = in;
    out_ = out;
  }
  bool collective() const { return kind_ == Kind::Collective; }

  // `call` begins, through `wire`; a collective replays over `worldRanks`
  // (plan rank -> world rank) in frames of at most `maxPayload` bytes. All
  // valid until it ends.
  void begin(Call& call, Wire& wire, const std::vector<int>& worldRanks, std::uint64_t maxPayload) {
    call_ = &call;
    wire_ = &wire;
    posted_ = false;
    worldRanks_ = &worldRanks;
    maxPayload_ = maxPayload < 1 ? 1 : maxPayload;
    if (kind_ == Kind::Collective) exec_.emplace(*steps_, in_, out_, plans_.scratch());
  }
  // Takes the call as far as it goes now: posts what comes next up to each
  // settle of `table` (CallTable::settleOrResume). False while it waits (the
  // table resumes `run` once the wait is over: call this again); true once
  // it ended, with `error` why it failed (null if it did not): a throw of the
  // wire's, of partsOf (a frame of too many parts) or of the settle.
  template <class Table>
  bool advance(Table& table, Resumable& run, std::exception_ptr& error) {
    try {
      while (kind_ == Kind::Collective ? exec_->next(*this) : postOnce())
        if (!table.settleOrResume(*call_, run)) return false;
    } catch (...) {
      error = std::current_exception();
    }
    return true;
  }
  // The call ended: nothing of it is posted or replayed any more.
  void end() { exec_.reset(); }

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
  enum class Kind { Send, Recv, Collective };

  // A send's or a receive's one post; false once it is done.
  bool postOnce() {
    if (posted_) return false;
    posted_ = true;
    if (kind_ == Kind::Send)
      wire_->sendFrame(*call_, to_, header_, in_, /*reference=*/true);
    else
      wire_->postRecv(*call_, key_, out_, bytes_);
    return true;
  }

  Kind kind_ = Kind::Send;
  bool posted_ = false;
  Call* call_ = nullptr;
  Wire* wire_ = nullptr;
  int to_ = -1;  // a send's
  wire::FrameHeader header_{};
  match::Key key_{};  // a receive's
  const void* in_ = nullptr;
  void* out_ = nullptr;
  std::size_t bytes_ = 0;
  // A collective's: the plans of its last kinds of call and the scratch
  // memory they replay with, this call's plan and replay.
  coll::PlanCache plans_;
  const std::vector<coll::Step>* steps_ = nullptr;
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
