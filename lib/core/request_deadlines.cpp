// RequestDeadlines (request_deadlines.hpp).
#include "core/request_deadlines.hpp"

namespace tether {

void RequestDeadlines::add(Op& op) {
  ops_.insert(op);
  arm();
}

void RequestDeadlines::remove(Op& op) {
  if (op.deadlineHook.is_linked()) ops_.erase(ops_.iterator_to(op));
  op.self.reset();  // the op's lease may end now
  // The timer stays set: it fires for nothing at worst, then arms for the next.
}

void RequestDeadlines::arm() {
  if (ops_.empty()) return;
  const auto earliest = ops_.begin()->expires;
  if (earliest >= armedFor_) return;  // set for an earlier (or the same) time already
  armedFor_ = earliest;
  if (!timer_) timer_.emplace(io_);
  timer_->expires_at(earliest);  // cancels a wait set for later; its handler sees the new time
  timer_->async_wait([this](boost::system::error_code ec) {
    if (ec == boost::asio::error::operation_aborted) return;  // set again (or closing): a newer wait runs
    fired();
  });
}

void RequestDeadlines::fired() {
  armedFor_ = Op::Clock::time_point::max();
  const auto now = Op::Clock::now();
  while (!ops_.empty() && ops_.begin()->expires <= now) {
    Op& op = *ops_.begin();
    ops_.erase(ops_.begin());
    std::shared_ptr<Op> owner = op.self.lock();
    if (owner) expired_(std::move(owner));
  }
  arm();
}

}  // namespace tether
