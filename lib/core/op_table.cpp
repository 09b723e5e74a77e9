#include "core/op_table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "tether/detail/core/failures.hpp"
#include "tether/detail/core/window.hpp"

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
  if (child_) return fmt::format("{}#{} (comm {:016x})", wire::opName(static_cast<wire::OpCode>(code)), coll, comm);
  return detail::coll::callName(wire::opName(static_cast<wire::OpCode>(code)), coll);
}

namespace {

Error lengthMismatch(int rank, const Op& op, int src, const wire::FrameHeader& h, std::size_t expected) {
  return Error(
      ErrorCode::Protocol,
      failures::failure(failures::rankName(rank), op.name(), failures::expectsBytes(src, wire::describe(h), expected)),
      rank, src);
}

bool postedFrom(const Op& op, int peer) {
  return std::any_of(op.posted.begin(), op.posted.end(),
                     [&](const match::Key& k) { return static_cast<int>(k.src) == peer; });
}

}  // namespace

void OpTable::add(Op& op) {
  if (!op.active) active_.push_back(&op);
  op.active = true;
}

void OpTable::remove(Op& op) {
  auto it = std::find(active_.begin(), active_.end(), &op);
  if (it != active_.end()) {
    *it = active_.back();
    active_.pop_back();
  }
  op.active = false;
}

bool OpTable::awaits(int peer) const {
  return std::any_of(active_.begin(), active_.end(), [&](const Op* op) { return postedFrom(*op, peer); });
}

bool OpTable::takeStashed(Op& op, const match::Key& key, void* buf, std::size_t len) {
  auto s = mailbox_.takeStashed(key);
  if (!s) return false;
  links_.frameReceived(static_cast<int>(key.src), s->header);
  if (s->header.length != len) throw lengthMismatch(rank_, op, static_cast<int>(key.src), s->header, len);
  if (len) std::memcpy(buf, s->payload.data(), len);
  buffers_.give(std::move(s->payload));
  return true;
}

void OpTable::post(Op& op, const match::Key& key, void* buf, std::size_t len) {
  mailbox_.post(key, match::Posted{buf, len, &op});
  op.posted.push_back(key);
  ++op.outstanding;
}

std::optional<OpTable::Claim> OpTable::claim(int src, const wire::FrameHeader& h) {
  auto key = match::keyOf(static_cast<std::uint32_t>(src), h);
  auto p = mailbox_.claimPosted(key);
  if (!p) return std::nullopt;
  links_.frameReceived(src, h);
  Op* op = const_cast<Op*>(static_cast<const Op*>(p->owner));
  auto it = std::find(op->posted.begin(), op->posted.end(), key);
  if (it != op->posted.end()) op->posted.erase(it);
  if (p->len != h.length) {
    failOp(*op, std::make_exception_ptr(lengthMismatch(rank_, *op, src, h, p->len)));
    return Claim{nullptr, nullptr};
  }
  return Claim{op, p->buf};
}

bool OpTable::deliver(int src, const wire::FrameHeader& h, const unsigned char* payload) {
  if (auto c = claim(src, h)) {
    if (!c->op) return true;
    if (h.length) std::memcpy(c->buf, payload, h.length);
    received(*c->op);
    return true;
  }
  return mailbox_.stash(match::keyOf(static_cast<std::uint32_t>(src), h),
                        match::Stashed{h, std::vector<unsigned char>(payload, payload + h.length)});
}

bool OpTable::deliver(int src, const wire::FrameHeader& h, std::vector<unsigned char>&& payload) {
  if (auto c = claim(src, h)) {  // a receive was posted while the payload was arriving
    if (!c->op) return true;
    if (h.length) std::memcpy(c->buf, payload.data(), h.length);
    buffers_.give(std::move(payload));
    received(*c->op);
    return true;
  }
  return mailbox_.stash(match::keyOf(static_cast<std::uint32_t>(src), h), match::Stashed{h, std::move(payload)});
}

void OpTable::received(Op& op) {
  if (op.error) return;
  --op.outstanding;
  wake(op);
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

// Schedules the operation's run to resume once the handler running now
// (a link's read or write completion, a timer) has returned: the driver runs
// resumeWoken between handlers. Never on a link's stack or in the middle of a
// frame, and without a trip through the event loop's queue (which would cost
// an extra epoll_wait per message).
void OpTable::wake(Op& op) {
  if (!op.resumer || (!op.error && op.outstanding > 0)) return;
  woken_.push_back(Woken{std::exchange(op.resumer, nullptr), op.error});
}

bool OpTable::settleOrResume(Op& op, Resumable& r) {
  if (op.error) std::rethrow_exception(op.error);
  if (op.outstanding == 0) return true;
  op.resumer = &r;
  return false;
}

void OpTable::resumeWoken() {
  if (inResume_) return;  // the outer call runs what was queued meanwhile
  inResume_ = true;
  struct Done {
    bool& flag;
    ~Done() { flag = false; }
  } done{inResume_};
  while (!woken_.empty()) {
    resuming_.swap(woken_);
    for (auto& w : resuming_) w.resumer->resume(w.error);
    resuming_.clear();
  }
}

void OpTable::failOp(Op& op, std::exception_ptr e) {
  if (op.error) return;
  op.error = e;
  for (const auto& k : op.posted) mailbox_.unpost(k, &op);
  op.posted.clear();
  op.draining += links_.abandonTransfers(op);
  op.outstanding = 0;
  wake(op);
  // Something failed: parked frames are read now (into the stash), so that
  // what their peers sent behind them (an abort notice, a goodbye) is seen.
  links_.unparkAll();
}

std::string OpTable::pendingDescription(const Op& op) const {
  if (!op.posted.empty()) {
    const auto& k = op.posted.front();
    std::string what = k.kind == wire::Kind::P2P ? failures::messageWithTag(k.tag) : failures::stepNumber(k.step);
    return failures::waitingFor(what, links_.describeRank(static_cast<int>(k.src)));
  }
  const int to = links_.queuedFor(op);
  return to < 0 ? "before completing"
                : detail::core::window::waitingToSend(links_.describeRank(to)) + links_.windowNote(op);
}

int OpTable::waitsOn(const Op& op) const {
  if (!op.posted.empty()) return static_cast<int>(op.posted.front().src);
  return links_.queuedFor(op);
}

}  // namespace tether
