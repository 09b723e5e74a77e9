#include "core/op_table.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include "tether/detail/core/failures.hpp"

namespace tether {

namespace failures = detail::core::failures;

std::string Op::name() const {
  switch (kind_) {
    case Kind::Send:
      return failures::sendName(peer_, tag_);
    case Kind::Recv:
      return failures::recvName(peer_, tag_);
    case Kind::Collective:
      break;
  }
  const char* op = wire::opName(static_cast<wire::OpCode>(code));
  return detail::coll::callName(op, coll, child_ ? comm : 0);
}

bool OpTable::awaits(int peer) const {
  return std::any_of(activeSet().begin(), activeSet().end(), [&](const Op* op) { return postedFrom(*op, peer); });
}

void OpTable::transferDone(Op& op, bool abandoned) {
  if (abandoned) {
    if (--op.draining > 0 || !op.afterDrain) return;
    auto then = std::move(op.afterDrain);
    op.afterDrain = nullptr;
    then();
    return;
  }
  received(op);
}

// A failed op's transfers are given up (each held mid-frame ends with
// transferDone(abandoned)); and since something failed, parked frames are
// read now (into the stash), so that what their peers sent behind them (an
// abort notice, a goodbye) is seen.
void OpTable::failed(Op& op) {
  op.draining += links_.abandonTransfers(op);
  links_.unparkAll();
}

std::string OpTable::pendingDescription(const Op& op) const {
  return pendingText(
      op, [&](int rank) { return links_.describeRank(op, rank); }, [&] { return links_.queuedFor(op); },
      [&] { return links_.windowNote(op); });
}

int OpTable::waitsOn(const Op& op) const {
  return CallTable::waitsOn(op, [&] { return links_.queuedFor(op); });
}

}  // namespace tether
