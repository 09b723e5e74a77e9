// RequestDeadlines (request_deadlines.hpp).
#include "core/request_deadlines.hpp"

namespace tether {

void RequestDeadlines::add(Op& op) {
  ops_.add(op, op.expires);
  arm();
}

void RequestDeadlines::remove(Op& op) {
  ops_.remove(op);
  op.self.reset();  // the op's lease may end now
  // The timer stays set: it fires for nothing at worst, then arms for the next.
}

void RequestDeadlines::arm() {
  const auto earliest = ops_.earliest();
  if (earliest >= armedFor_) return;  // none (max), or set for an earlier (or the same) time already
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
  ops_.expire(Op::Clock::now(), [this](Op& op) {
    if (std::shared_ptr<Op> owner = op.self.lock()) expired_(std::move(owner));
  });
  arm();
}

}  // namespace tether
