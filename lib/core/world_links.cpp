// The world's links: one per peer, opened lazily (or by the rendezvous),
// admitted by the lower-rank-wins rule, closed with a lingering goodbye; and
// the control frames that travel on them.
#include <fmt/format.h>

#include <boost/asio/post.hpp>
#include <algorithm>

#include "base/bytes.hpp"
#include "base/endpoint.hpp"
#include "base/log.hpp"
#include "core/world.hpp"

namespace tether {

using link::Link;

Link& World::newLink(int peer) {
  link::LinkLimits limits{cfg_.maxPayload, rank()};
  links_[peer] = std::make_shared<Link>(io_, static_cast<link::LinkSink&>(*this), peer, limits);
  return *links_[peer];
}

std::shared_ptr<Link> World::linkFor(int peer) {
  auto& l = links_[peer];
  if (l && l->state() != Link::State::Closed) return l;
  if (peers_[peer].gone || l) return nullptr;
  newLink(peer);
  connector_.dial(peer, toEndpoint(address(peer)));
  return l;
}

void World::sendControl(Link& link, wire::Kind kind, const std::vector<unsigned char>& payload) {
  link.enqueue(link::controlFrame(kind, payload));
}

std::string World::describeRank(int worldRank) const {
  if (worldRank < 0 || worldRank >= nranks()) return fmt::format("rank {}", worldRank);
  const auto& l = links_[worldRank];
  if (l && !l->remote().empty()) return fmt::format("rank {} ({})", worldRank, l->remote());
  return fmt::format("rank {}", worldRank);
}

// ---- rdv::Host ----

void World::connect(int peer, const PeerAddress& at) {
  newLink(peer);
  connector_.dial(peer, toEndpoint(at), Clock::now() + cfg_.timeout);
}

void World::send(int peer, wire::Kind kind, wire::SharedBytes payload) {
  if (auto& l = links_[peer]; l && l->state() != Link::State::Closed) l->enqueue(link::controlFrame(kind, std::move(payload)));
}

void World::post(std::function<void()> fn) { asio::post(io_, std::move(fn)); }

// ---- link::Admission ----

std::optional<wire::Reject> World::admit(int peer, const std::string& remote) {
  using wire::RejectCode;
  if (peer < 0 || peer >= nranks() || peer == rank())
    return wire::Reject{RejectCode::BadRank, fmt::format("rank {} is not a peer of rank {} in a world of {}", peer,
                                                         rank(), nranks())};
  if (shuttingDown_) return wire::Reject{RejectCode::ShuttingDown, "this rank is shutting down"};
  auto& l = links_[peer];
  if (l && l->state() == Link::State::Up && l->dialedByUs() && peer > rank())
    return wire::Reject{RejectCode::Simultaneous, "both ranks dialled; the lower rank's connection is kept"};
  if (peers_[peer].gone || (l && l->state() == Link::State::Up)) {
    std::string why = fmt::format("rank {} is already connected{}", peer,
                                  l && !l->remote().empty() ? " from " + l->remote() : std::string());
    // Two processes claim the same rank: the job is misconfigured.
    if (!initComplete_) rendezvous_->onDuplicateClaim(peer, remote);
    return wire::Reject{RejectCode::DuplicateRank, why};
  }
  if (l && l->state() == Link::State::Dialing && peer > rank())
    return wire::Reject{RejectCode::Simultaneous, "both ranks dialled; the lower rank's connection is kept"};
  // Reserve the link now: a send to this peer while our welcome is on its way
  // must wait for this connection, not dial a second one (which the peer,
  // still waiting for our welcome, could accept too — each side would then
  // keep a different connection).
  if (!l) newLink(peer);
  return std::nullopt;
}

void World::connected(int peer, tcp::socket socket, bool dialedByUs) {
  auto& l = links_[peer];
  if (!l) newLink(peer);
  if (l->state() != Link::State::Dialing) {
    boost::system::error_code ignored;
    socket.close(ignored);
    return;
  }
  l->attach(std::move(socket), dialedByUs);
  log::trace(rank(), "link to rank {} is up ({})", peer, l->remote());
  if (!initComplete_) rendezvous_->onLinkUp(peer);
}

void World::connectFailed(int peer, const link::ConnectFailure& failure) {
  if (!initComplete_) rendezvous_->onConnectFailed(peer, failure);
  auto& l = links_[peer];
  if (!l || l->state() != Link::State::Dialing) return;
  // A peer that is closing its bootstrap left in order, as if it had said goodbye.
  if (failure.peerClosing) l->markGoodbye();
  l->fail(failure.reason);
}

void World::refused(const link::Refusal& refusal) {
  if (!initComplete_) rendezvous_->onRefused(refusal);
}

// ---- link::LinkSink: link events ----

void World::onLinkDown(Link& link, const std::string& reason, bool graceful) {
  int p = link.peer();
  auto& st = peers_[p];
  if (st.gone) return;
  st.gone = true;
  st.graceful = graceful;
  st.reason = reason;
  if (shuttingDown_) return checkDrained();
  if (!graceful) {
    if (link.remote().empty())
      log::warn(rank(), "{}", reason);  // never connected: the reason says to whom
    else
      log::warn(rank(), "lost {}: {}", describeRank(p), reason);
  }
  failOpsOfPeer(p, graceful);
  if (!initComplete_) rendezvous_->onLinkDown(p, reason, graceful);
}

void World::onLinkIdle(Link&) {
  if (shuttingDown_) checkDrained();
}

void World::onTransferDone(link::Owner& owner, bool abandoned) {
  Op& op = static_cast<Op&>(owner);
  if (abandoned) {
    if (--op.draining > 0 || !op.afterDrain) return;
    auto then = std::move(op.afterDrain);
    op.afterDrain = nullptr;
    then();
    return;
  }
  if (op.error) return;
  --op.outstanding;
  wake(op);
}

// Closing is done when every link is closed, or its peer confirmed reading
// our goodbye (and so every frame before it), or its peer aborted (it will
// not read anything any more).
void World::checkDrained() {
  if (!drainTimer_) return;
  for (auto& l : links_)
    if (l && l->state() != Link::State::Closed && !l->goodbyeAcked() && !peers_[l->peer()].aborted) return;
  drained_ = true;
  drainTimer_->cancel();
}

void World::onControlFrame(Link& link, const wire::FrameHeader& h, std::vector<unsigned char>&& payload) {
  try {
    switch (h.kind) {
      case wire::Kind::Abort: {
        ByteReader r(payload.data(), payload.size());
        int origin = static_cast<int>(r.u32());
        std::string reason = r.str();
        peers_[link.peer()].aborted = true;
        abortOnProgress(origin, reason, true);
        if (shuttingDown_) checkDrained();
        return;
      }
      case wire::Kind::Goodbye:
        // Everything the peer sent before this has been read: say so, so it
        // can close without a reset destroying frames still in our buffers.
        link.markGoodbye();
        sendControl(link, wire::Kind::GoodbyeAck, {});
        return;
      case wire::Kind::GoodbyeAck:
        link.markGoodbyeAcked();
        checkDrained();
        return;
      case wire::Kind::Heartbeat:
        return;
      default:  // the rendezvous' own frames (Register, Table)
        if (rendezvous_->onFrame(link.peer(), h.kind, std::make_shared<const wire::Bytes>(std::move(payload))))
          return;
        link.fail(fmt::format("unexpected {} frame on an established link", wire::kindName(h.kind)));
        return;
    }
  } catch (const std::exception& e) {
    log::warn(rank(), "malformed {} frame from {}: {}", wire::kindName(h.kind), describeRank(link.peer()), e.what());
    link.fail(fmt::format("malformed {} frame: {}", wire::kindName(h.kind), e.what()));
  }
}

}  // namespace tether
