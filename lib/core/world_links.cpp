// The world's links: one current link per peer, opened lazily (or by the
// rendezvous), admitted by the lower-rank-wins rule, closed with a lingering
// goodbye and reopened under the link budget by the rules of
// docs/ordering.md ("Closing and reopening a link", R1-R8, checked by the
// model in test/model/); and the control frames that travel on them.
#include <fmt/format.h>

#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <algorithm>

#include "base/bytes.hpp"
#include "base/endpoint.hpp"
#include "base/log.hpp"
#include "core/world.hpp"
#include "wire/notice.hpp"

namespace tether {

using link::Link;

Link& World::newLink(int peer) {
  link::LinkLimits limits{cfg_.maxPayload, rank()};
  links_[peer] = std::make_shared<Link>(io_, static_cast<link::LinkSink&>(*this), peer, epoch_[peer], limits);
  links_[peer]->lastUsed = ++useClock_;
  return *links_[peer];
}

void World::dial(int peer) {
  connector_.dial(peer, epoch_[peer], toEndpoint(address(peer)), {Clock::now() + cfg_.timeout, false});
}

std::shared_ptr<Link> World::linkFor(int peer) {
  auto& l = links_[peer];
  if (l) return l;
  if (peers_[peer].gone || peers_[peer].leaving) return nullptr;
  enforceBudget();
  newLink(peer);
  if (awaitingAck(peer))
    dialDeferred_[peer] = 1;  // R3: dial once our goodbye on the old connection is acknowledged
  else
    dial(peer);
  return l;
}

bool World::awaitingAck(int peer) const {
  return std::any_of(lingering_[peer].begin(), lingering_[peer].end(),
                     [](const auto& l) { return l->goodbyeSent() && !l->ackRead(); });
}

void World::setAside(Link& link) {
  const int p = link.peer();
  if (links_[p].get() != &link) return;
  lingering_[p].push_back(std::move(links_[p]));
  links_[p].reset();
  ++epoch_[p];
}

int World::openLinks() const {
  int n = 0;
  forEachLink([&](const Link& l) { n += l.state() != Link::State::Closed; });
  return n;
}

// The soft link budget: at most cfg_.maxLinks open links; a new one (dialled
// or admitted) past it closes the least recently used link that is idle
// (nothing queued, no frame half-read, no receive posted from its peer, so a
// death there still shows) with an idle goodbye. Incoming connections are
// always admitted.
void World::enforceBudget() {
  // The rendezvous owns the links it opens until it is done.
  if (life_.joining() || openLinks() < cfg_.maxLinks) return;
  std::vector<char> awaited(static_cast<std::size_t>(nranks()), 0);
  for (const Op* op : ops_.activeSet())
    for (const auto& k : op->posted) awaited[k.src] = 1;
  Link* victim = nullptr;
  for (const auto& l : links_)
    if (l && l->state() == Link::State::Up && l->idle() && !l->midFrame() && !awaited[l->peer()] &&
        (!victim || l->lastUsed < victim->lastUsed))
      victim = l.get();
  if (!victim) return;
  log::trace(rank(), "link budget ({} links): closing the idle link to rank {}", cfg_.maxLinks, victim->peer());
  victim->sendGoodbye(wire::GoodbyeMode::Idle);
  setAside(*victim);
}

void World::sendControl(Link& link, wire::Kind kind, const std::vector<unsigned char>& payload) {
  link.enqueue(link::controlFrame(kind, payload));
}

bool World::sendControlTo(int peer, wire::Kind kind, const std::vector<unsigned char>& payload) {
  if (peer < 0 || peer >= nranks() || peer == rank()) return false;
  auto l = linkFor(peer);
  if (!l || l->goodbyeSent()) return false;
  sendControl(*l, kind, payload);
  return true;
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
  connector_.dial(peer, epoch_[peer], toEndpoint(at), {Clock::now() + cfg_.timeout, /*retryRefused=*/true});
}

void World::send(int peer, wire::Kind kind, wire::SharedBytes payload) {
  if (auto& l = links_[peer]) l->enqueue(link::controlFrame(kind, std::move(payload)));
}

bool World::release(int peer) {
  auto& l = links_[peer];
  if (!l || l->state() != Link::State::Up || !l->idle() || l->midFrame()) return false;
  log::trace(rank(), "rendezvous: releasing the link to rank {}", peer);
  l->sendGoodbye(wire::GoodbyeMode::Idle);
  setAside(*l);
  return true;
}

void World::post(std::function<void()> fn) { asio::post(io_, std::move(fn)); }

// ---- link::Admission ----

link::Verdict World::admit(int peer, std::uint32_t epoch, const std::string& remote) {
  using link::Verdict;
  using wire::RejectCode;
  if (peer < 0 || peer >= nranks() || peer == rank())
    return Verdict::refuse(RejectCode::BadRank,
                           fmt::format("rank {} is not a peer of rank {} in a world of {}", peer, rank(), nranks()));
  if (epoch != epoch_[peer])  // R5: dialled before a close completed here
    return Verdict::refuse(RejectCode::Stale,
                           fmt::format("connection {} of rank {} is closed ({} now)", epoch, peer, epoch_[peer]));
  auto& l = links_[peer];  // R6: only the current link counts
  if (life_.closing() && !l) return Verdict::refuse(RejectCode::ShuttingDown, "this rank is shutting down");  // R7
  if (awaitingAck(peer)) return Verdict::wait();                                                              // R4
  if (l && l->state() == Link::State::Up && l->dialedByUs() && peer > rank())
    return Verdict::refuse(RejectCode::Simultaneous, "both ranks dialled; the lower rank's connection is kept");
  if (peers_[peer].gone || (l && l->state() == Link::State::Up)) {
    std::string why = fmt::format("rank {} is already connected{}", peer,
                                  l && !l->remote().empty() ? " from " + l->remote() : std::string());
    // Two processes claim the same rank: the job is misconfigured.
    if (life_.joining()) rendezvous_->onDuplicateClaim(peer, remote);
    return Verdict::refuse(RejectCode::DuplicateRank, why);
  }
  if (l && l->state() == Link::State::Dialing && peer > rank())
    return Verdict::refuse(RejectCode::Simultaneous, "both ranks dialled; the lower rank's connection is kept");
  // Reserve the link now: a send to this peer while our welcome is on its way
  // must wait for this connection, not dial a second one (which the peer,
  // still waiting for our welcome, could accept too — each side would then
  // keep a different connection). The budget is soft: an incoming link is
  // always admitted, and the least recently used idle one makes room.
  if (!l) {
    enforceBudget();
    newLink(peer);
  }
  return Verdict::welcome();
}

asio::awaitable<void> World::predecessorClosed(int peer, link::Clock::time_point deadline) {
  auto timer = std::make_shared<asio::steady_timer>(io_, deadline);
  predecessorWaits_[peer].push_back(timer);
  boost::system::error_code ignored;
  co_await timer->async_wait(asio::redirect_error(asio::use_awaitable, ignored));
}

void World::connected(int peer, std::uint32_t epoch, tcp::socket socket, bool dialedByUs) {
  auto l = links_[peer];  // a copy: attaching may already close it and change links_
  // A dial's outcome belongs to the link it was started for (R5).
  if (!l || l->epoch() != epoch || l->state() != Link::State::Dialing) {
    boost::system::error_code ignored;
    socket.close(ignored);
    return;
  }
  l->attach(std::move(socket), dialedByUs);
  log::trace(rank(), "link to rank {} is up ({})", peer, l->remote());
  ++linksOpened_;
  peakLinks_ = std::max(peakLinks_, openLinks());
  if (life_.joining()) rendezvous_->onLinkUp(peer);
}

void World::connectFailed(int peer, std::uint32_t epoch, const link::ConnectFailure& failure) {
  if (life_.joining()) rendezvous_->onConnectFailed(peer, failure);
  auto& l = links_[peer];
  if (!l || l->epoch() != epoch || l->state() != Link::State::Dialing) return;
  // A peer that is closing its bootstrap left in order, as if it had said goodbye.
  if (failure.peerClosing) peers_[peer].leaving = true;
  l->fail(failure.reason);
}

bool World::stillDialing(int peer, std::uint32_t epoch) const {
  const auto& l = links_[peer];
  return l && l->epoch() == epoch && l->state() == Link::State::Dialing;
}

void World::refused(const link::Refusal& refusal) {
  if (life_.joining()) rendezvous_->onRefused(refusal);
}

// ---- link::LinkSink: link events ----

void World::onGoodbye(Link& link, wire::GoodbyeMode mode) {
  if (mode == wire::GoodbyeMode::Final) peers_[link.peer()].leaving = true;
  setAside(link);
}

void World::onLinkDown(Link& link, const std::string& reason, bool graceful) {
  const int p = link.peer();
  auto& lingering = lingering_[p];
  auto it = std::find_if(lingering.begin(), lingering.end(), [&](const auto& l) { return l.get() == &link; });
  std::shared_ptr<Link> keep;  // the link may be destroyed below; keep it until this returns
  if (it != lingering.end()) {
    keep = *it;
    lingering.erase(it);
    for (auto& t : predecessorWaits_[p]) t->cancel();  // R4: held hellos may proceed
    predecessorWaits_[p].clear();
  } else if (links_[p].get() == &link) {
    keep = std::move(links_[p]);
    links_[p].reset();
  }
  auto& st = peers_[p];
  const bool clean = link.closedAfterGoodbye();
  if (st.leaving) {
    // Its final goodbye was read (or it refused us as shutting down): it left in order.
    if (!st.gone) st.gone = true, st.graceful = true, st.reason = "it closed its bootstrap";
  } else if (!clean && !link.idleClose() && !link.goodbyeSent()) {
    // A connection that broke without a goodbye: the peer is lost.
    if (!st.gone) st.gone = true, st.graceful = graceful, st.reason = reason;
  }
  // Otherwise an idle close (clean, or broken while lingering): the peer may
  // be dialled again; a dial reveals whether it is still there.
  if (dialDeferred_[p] && !awaitingAck(p) && links_[p] && links_[p]->state() == Link::State::Dialing) {
    dialDeferred_[p] = 0;
    dial(p);  // R3: our goodbye is acknowledged (or the old connection failed); also while shutting down
  }
  // A rank the abort notice was sent to down the tree is gone: its children
  // get the notice from here instead.
  if (st.gone && life_.joined()) relay_.peerGone(p);
  if (life_.closing()) return checkDrained();
  if (!clean && !st.graceful) {
    if (link.remote().empty())
      log::warn(rank(), "{}", reason);  // never connected: the reason says to whom
    else
      log::warn(rank(), "lost {}: {}", describeRank(p), reason);
  }
  failOpsOfPeer(p, st.gone, st.graceful, link);
  if (!clean && !st.gone && !links_[p] && ops_.awaits(p)) linkFor(p);  // learn whether it is still there
  if (life_.joining()) rendezvous_->onLinkDown(p, reason, st.graceful || clean);
}

void World::onLinkIdle(Link&) {
  if (life_.closing()) checkDrained();
}

void World::onTransferDone(link::Owner& owner, bool abandoned) {
  ops_.transferDone(static_cast<Op&>(owner), abandoned);
}

// Closing is done when every link has closed after its goodbye exchange (so
// every frame before it was read), or its peer aborted (it will not read
// anything any more).
void World::checkDrained() {
  if (!drainTimer_ || life_.drained()) return;
  int open = 0;
  forEachLink([&](const Link& l) { open += l.state() != Link::State::Closed && !peers_[l.peer()].aborted; });
  if (life_.linksOpen(open)) drainTimer_->cancel();
}

void World::onControlFrame(Link& link, const wire::FrameHeader& h, std::vector<unsigned char>&& payload) {
  try {
    switch (h.kind) {
      case wire::Kind::Abort: {
        auto n = wire::decodeAbortNotice(payload);
        if (n.origin >= static_cast<std::uint32_t>(nranks()) ||
            (n.lost != wire::kNoRank && n.lost >= static_cast<std::uint32_t>(nranks())))
          throw std::invalid_argument("rank out of range");
        peers_[link.peer()].aborted = true;
        abortOnProgress(n, true, link.peer());
        if (life_.closing()) checkDrained();
        return;
      }
      case wire::Kind::Heartbeat:
        return;
      case wire::Kind::StatusQuery:
        return answerStatus(link, wire::decodeStatusQuery(payload));
      case wire::Kind::StatusAnswer:
        return probe_.onAnswer(link.peer(), wire::decodeStatusAnswer(payload));
      default:  // the rendezvous' own frames (Register, Table)
        if (rendezvous_->onFrame(link.peer(), h.kind, std::make_shared<const wire::Bytes>(std::move(payload)))) return;
        link.fail(fmt::format("unexpected {} frame on an established link", wire::kindName(h.kind)));
        return;
    }
  } catch (const std::exception& e) {
    log::warn(rank(), "malformed {} frame from {}: {}", wire::kindName(h.kind), describeRank(link.peer()), e.what());
    link.fail(fmt::format("malformed {} frame: {}", wire::kindName(h.kind), e.what()));
  }
}

}  // namespace tether
