// The sequence guard: which collective each communicator of this world is in,
// and the frames checked against it (a frame of a finished collective, another
// operation at the same collective id, one left over after a collective
// ended). The checks are the shared guard's (tether/detail/core/
// sequence_guard.hpp); here are its TCP types, its hooks (the operation table
// ends a broken op; the log) and what a stall probe asks of a failed
// collective. Progress thread only.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <string>

#include "base/layer.hpp"
#include "core/op.hpp"
#include "core/sequence.hpp"
#include "match/mailbox.hpp"
#include "tether/detail/core/frame_calls.hpp"
#include "tether/detail/core/sequence_guard.hpp"
#include "tether/error.hpp"
#include "wire/frame.hpp"

TETHER_LAYER(6, "core");

namespace tether {

// How a unit that finds an operation broken ends it (the operation table).
class OpFailer {
 public:
  virtual void failOp(Op& op, std::exception_ptr e) = 0;

 protected:
  ~OpFailer() = default;
};

// The shared call table's and sequence guard's TCP types: ops, the wire's
// frames, the link mailbox (tether/detail/core/frame_calls.hpp).
using TcpCalls = detail::core::FrameCalls<Op, CollectiveSeq>;

// The shared guard's hooks here: the operation table ends a broken op; the log.
class TcpSequenceHooks : public detail::core::SequenceGuard<TcpCalls>::Hooks {
 protected:
  TcpSequenceHooks(int rank, OpFailer& ops) : rank_(rank), ops_(ops) {}
  ~TcpSequenceHooks() = default;

  const int rank_;

 private:
  void failCall(Op& op, std::exception_ptr e) override { ops_.failOp(op, std::move(e)); }
  void noticed(const Error& e) override;

  OpFailer& ops_;
};

class SequenceGuard final : private TcpSequenceHooks, public detail::core::SequenceGuard<TcpCalls> {
 public:
  using Base = detail::core::SequenceGuard<TcpCalls>;

  SequenceGuard(int rank, OpFailer& ops) : TcpSequenceHooks(rank, ops), Base(static_cast<TcpSequenceHooks&>(*this)) {}

  // The shared guard's end; a failed collective is also remembered for a
  // peer's stall probe.
  void end(Op& op, std::exception_ptr& e, match::Mailbox& mailbox);
};

}  // namespace tether
