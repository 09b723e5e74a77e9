#include "core/sequence_guard.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "base/log.hpp"

#include "tether/detail/core/call_frames.hpp"
#include "tether/detail/core/failures.hpp"

namespace tether {

namespace failures = detail::core::failures;

namespace {
// Why a frame from `src` at `op`'s collective id is not of `op` (another
// operation, or a broadcast with another root); empty if it is.
std::string foreignText(int src, const wire::FrameHeader& h, const Op& op) {
  if (wire::opCodeOf(h.tag) != op.code) return failures::differentCollectives(src, wire::describe(h));
  if (h.root != op.root)
    return failures::differentRoots(src,
                                    detail::coll::callName(wire::opName(static_cast<wire::OpCode>(op.code)), h.coll),
                                    static_cast<int>(h.root), static_cast<int>(op.root));
  return std::string();
}
}  // namespace

const CollectiveSeq* SequenceGuard::find(std::uint64_t comm) const {
  auto it = comms_.find(comm);
  return it == comms_.end() ? nullptr : it->second.get();
}

bool SequenceGuard::admit(int src, const wire::FrameHeader& h) {
  const CollectiveSeq* seq = find(h.comm);
  if (!seq) return true;
  if (seq->finished(h.coll)) {
    reportProtocol(h.comm, Error(ErrorCode::Protocol,
                                 fmt::format("rank {}: received {} from rank {}, but this rank has already "
                                             "finished that collective (latest: #{})",
                                             rank_, wire::describe(h), src, seq->started),
                                 rank_, src));
    return false;
  }
  auto run = seq->running.find(h.coll);
  if (run == seq->running.end()) return true;
  const std::string foreign = foreignText(src, h, *run->second);
  if (foreign.empty()) return true;
  reportProtocol(h.comm, Error(ErrorCode::Protocol,
                               failures::failure(failures::rankName(rank_), run->second->name(), foreign), rank_, src));
  return false;
}

bool SequenceGuard::begin(CollectiveSeq& seq, Op& op) {
  seq.started = std::max(seq.started, op.coll);
  seq.running[op.coll] = &op;
  if (!seq.poison) return true;
  ops_.failOp(op, seq.poison);
  return false;
}

// The frames of a collective call in the mailbox, by world rank.
namespace {
struct OfCall {
  const Op& op;
  bool operator()(const match::Key& k) const {
    return k.kind == wire::Kind::Collective && k.comm == op.comm && k.coll == op.coll;
  }
};
int sourceOf(const match::Key& k) { return static_cast<int>(k.src); }
std::string describe(const match::Stashed& s) { return wire::describe(s.header); }
}  // namespace

void SequenceGuard::checkStashed(Op& op, const match::Mailbox& mailbox) {
  const auto fault = detail::core::foreignFrame<match::Stashed>(
      mailbox, OfCall{op}, sourceOf, [&](int src, const match::Stashed& s) { return foreignText(src, s.header, op); });
  if (fault)
    ops_.failOp(op, std::make_exception_ptr(Error(ErrorCode::Protocol,
                                                  failures::failure(failures::rankName(rank_), op.name(), fault.what),
                                                  rank_, fault.source)));
}

void SequenceGuard::end(Op& op, std::exception_ptr& e, match::Mailbox& mailbox) {
  if (!op.seq) return;
  op.seq->running.erase(op.coll);
  if (!e) {
    try {
      checkLeftovers(op, mailbox);
    } catch (...) {
      e = std::current_exception();
    }
  }
  if (!e) return;
  op.seq->failedColl = op.coll;
  try {
    std::rethrow_exception(e);
  } catch (const Error& err) {
    op.seq->failedWhat = err.what();
    op.seq->failedPeer = err.peer();
  } catch (const std::exception& other) {
    op.seq->failedWhat = other.what();
    op.seq->failedPeer = -1;
  }
}

// Every frame of a finished collective has been consumed by a receive; one
// left over was sent by a rank that ran a different algorithm or operation.
void SequenceGuard::checkLeftovers(Op& op, match::Mailbox& mailbox) {
  const auto extra = detail::core::leftoverFrame<match::Stashed>(mailbox, OfCall{op}, sourceOf, describe, op.name());
  if (!extra) return;
  mailbox.dropStashed(OfCall{op});
  throw Error(ErrorCode::Protocol, failures::failure(failures::rankName(rank_), op.name(), extra.what), rank_,
              extra.source);
}

void SequenceGuard::reportProtocol(std::uint64_t comm, const Error& e) {
  log::warn(rank_, "{}", e.what());
  auto it = comms_.find(comm);
  if (it == comms_.end()) return;
  auto& seq = *it->second;
  if (seq.running.empty()) {
    if (!seq.poison) seq.poison = std::make_exception_ptr(e);
    return;
  }
  std::vector<Op*> ops;
  for (auto& [coll, op] : seq.running) ops.push_back(op);
  for (Op* op : ops) ops_.failOp(*op, std::make_exception_ptr(e));
}

}  // namespace tether
