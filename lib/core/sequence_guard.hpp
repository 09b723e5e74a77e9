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

// The shared guard's TCP types: ops, wire headers, the link mailbox.
struct TcpSequences {
  using Call = Op;
  using Key = match::Key;
  using Header = wire::FrameHeader;
  using Mailbox = match::Mailbox;
  using Stashed = match::Stashed;
  using Seq = CollectiveSeq;
  static std::uint64_t commOf(const Header& h) { return h.comm; }
  static std::uint64_t collOf(const Header& h) { return h.coll; }
  static CollectiveSeq* seqOf(const Op& op) { return op.seq.get(); }
  static std::uint64_t collOf(const Op& op) { return op.coll; }
  static std::string nameOf(const Op& op) { return op.name(); }
  static bool ofCall(const Key& k, const Op& op) {
    return k.kind == wire::Kind::Collective && k.comm == op.comm && k.coll == op.coll;
  }
  static int sourceOf(const Key& k) { return static_cast<int>(k.src); }
  static std::string describe(const Header& h) { return wire::describe(h); }
  // Frames name their sender by its world rank; errors by the communicator's.
  static int sourceRank(const CollectiveSeq& seq, int src) { return seq.names.rankOf(src); }
  static std::string sourceName(const CollectiveSeq& seq, int src) { return seq.names.nameOfWorld(src); }
  static std::string foreignText(const std::string& src, const Header& h, const Op& op);
};

// The shared guard's hooks here: the operation table ends a broken op; the log.
class TcpSequenceHooks : public detail::core::SequenceGuard<TcpSequences>::Hooks {
 protected:
  TcpSequenceHooks(int rank, OpFailer& ops) : rank_(rank), ops_(ops) {}
  ~TcpSequenceHooks() = default;

  const int rank_;

 private:
  void failCall(Op& op, std::exception_ptr e) override { ops_.failOp(op, std::move(e)); }
  void noticed(const Error& e) override;

  OpFailer& ops_;
};

class SequenceGuard final : private TcpSequenceHooks, public detail::core::SequenceGuard<TcpSequences> {
 public:
  using Base = detail::core::SequenceGuard<TcpSequences>;

  SequenceGuard(int rank, OpFailer& ops) : TcpSequenceHooks(rank, ops), Base(static_cast<TcpSequenceHooks&>(*this)) {}

  // The shared guard's end; a failed collective is also remembered for a
  // peer's stall probe.
  void end(Op& op, std::exception_ptr& e, match::Mailbox& mailbox);
};

}  // namespace tether
