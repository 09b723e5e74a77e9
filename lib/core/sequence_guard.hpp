// The sequence guard: which collective each communicator of this world is in,
// and the frames checked against it (a frame of a finished collective, another
// operation at the same collective id, one left over after a collective
// ended). Progress thread only.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <unordered_map>

#include "base/layer.hpp"
#include "core/op.hpp"
#include "core/sequence.hpp"
#include "match/mailbox.hpp"
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

class SequenceGuard {
 public:
  SequenceGuard(int rank, OpFailer& ops) : rank_(rank), ops_(ops) {}

  void add(std::uint64_t comm, std::shared_ptr<CollectiveSeq> seq) { comms_[comm] = std::move(seq); }
  void remove(std::uint64_t comm) { comms_.erase(comm); }
  // Null if this rank has no such communicator (any more).
  const CollectiveSeq* find(std::uint64_t comm) const;

  // A collective frame from `src` that no receive was posted for: false if it
  // breaks its communicator's sequence (reported; the frame is dropped).
  bool admit(int src, const wire::FrameHeader& h);
  // `op` starts as collective op.coll of `seq`; false if it failed at once
  // (the communicator was poisoned by a protocol error while none ran).
  bool begin(CollectiveSeq& seq, Op& op);
  // A frame already waiting for op's collective id but naming another
  // operation: the ranks called different collectives; fails `op`.
  void checkStashed(Op& op, const match::Mailbox& mailbox);
  // `op` ended (e: its error, or null). A collective that returned but left a
  // frame of its id unread gets a Protocol error in `e`; a failed one is
  // remembered for a peer's stall probe.
  void end(Op& op, std::exception_ptr& e, match::Mailbox& mailbox);
  // A frame that breaks `comm`'s sequence: every collective running on it
  // fails; if none runs, the next one will.
  void reportProtocol(std::uint64_t comm, const Error& e);

 private:
  void checkLeftovers(Op& op, match::Mailbox& mailbox);

  const int rank_;
  OpFailer& ops_;
  std::unordered_map<std::uint64_t, std::shared_ptr<CollectiveSeq>> comms_;
};

}  // namespace tether
