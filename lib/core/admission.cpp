#include "core/admission.hpp"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <algorithm>

#include "base/log.hpp"
#include "tether/detail/core/failures.hpp"

namespace tether {

namespace asio = boost::asio;

link::Verdict LinkAdmission::admit(int peer, std::uint32_t epoch, const std::string& remote) {
  bool duplicate = false;
  auto verdict = table_.admit(peer, epoch, life_.closing(), &duplicate);
  if (duplicate && life_.joining()) rendezvous_->onDuplicateClaim(peer, remote);
  // A rank shutting down after an abort (its rendezvous failed, or a peer
  // aborted) says why: a rank that dials it now, late, learns the cause and
  // does not take this rank for the one at fault.
  if (verdict.kind == link::Verdict::Kind::Reject && verdict.reject.code == wire::RejectCode::ShuttingDown &&
      abort_.aborted()) {
    const wire::AbortNotice n = abort_.notice();
    verdict.reject.reason += " (" + detail::core::failures::aborted(false, static_cast<int>(n.origin), n.reason) + ")";
  }
  // Reserve the link now: a send to this peer while our welcome is on its way
  // must wait for this connection, not dial a second one (which the peer,
  // still waiting for our welcome, could accept too — each side would then
  // keep a different connection). The budget is soft: an incoming link is
  // always admitted, and the least recently used idle one makes room.
  if (verdict.kind == link::Verdict::Kind::Welcome && !table_.current(peer)) {
    makeRoom_();
    table_.open(peer);
  }
  return verdict;
}

asio::awaitable<void> LinkAdmission::predecessorClosed(int peer, link::Clock::time_point deadline) {
  auto timer = table_.holdHello(peer, deadline);
  boost::system::error_code ignored;
  co_await timer->async_wait(asio::redirect_error(asio::use_awaitable, ignored));
}

void LinkAdmission::connected(int peer, std::uint32_t epoch, std::shared_ptr<link::Stream> stream, bool dialedByUs) {
  auto l = table_.dialing(peer, epoch);  // a copy: attaching may already close it and change the table
  // A dial's outcome belongs to the link it was started for (R5).
  if (!l) {
    stream->close();
    return;
  }
  l->attach(std::move(stream), dialedByUs);
  log::trace(rank_, "link to rank {} is up ({})", peer, l->remote());
  ++linksOpened_;
  peakLinks_ = std::max(peakLinks_, table_.openCount());
  if (life_.joining()) rendezvous_->onLinkUp(peer);
  if (life_.joined() && clock_) clock_->mark(InitClock::FirstLink);
}

void LinkAdmission::connectFailed(int peer, std::uint32_t epoch, const link::ConnectFailure& failure) {
  if (life_.joining()) rendezvous_->onConnectFailed(peer, failure);
  auto l = table_.dialing(peer, epoch);
  if (!l) return;
  // A peer that is closing its bootstrap left in order, as if it had said goodbye.
  if (failure.peerClosing) table_.peer(peer).leaving = true;
  l->fail(failure.reason);
}

void LinkAdmission::refused(const link::Refusal& refusal) {
  if (life_.joining()) rendezvous_->onRefused(refusal);
}

}  // namespace tether
