// Peers: links opened, re-dialled, closed under the budget; link events and
// the control frames that travel on the links (peers.hpp).
#include "core/peers.hpp"

#include <fmt/format.h>

#include "base/bytes.hpp"
#include "base/endpoint.hpp"
#include "base/log.hpp"
#include "link/tcp_stream.hpp"
#include "tether/detail/core/failures.hpp"

namespace tether {

namespace failures = detail::core::failures;
using link::Link;
using Clock = std::chrono::steady_clock;

// After the rendezvous every peer listens: a refused dial is its loss at
// once, a dial it keeps cutting (reset, closed) after a second of retries.
// A silent one (a frozen or overloaded peer: the kernel accepts, nobody
// answers) is no proof of death: it is tried past the call's deadline, so
// the call ends first with Timeout naming that rank (its stall probe, at
// most 1 s), not with a PeerLost for a rank that may still be alive.
void Peers::dial(int peer) {
  constexpr auto kBrokenRetries = std::chrono::seconds(1);
  constexpr auto kPastTheProbe = std::chrono::seconds(2);
  const auto now = Clock::now();
  countDial(peer);
  p_.connector.dial(peer, p_.table.epoch(peer), link::tcpEndpoint(rendezvous_->address(peer)),
                    {now + cfg_.timeout + kPastTheProbe, /*retryRefused=*/false, now + kBrokenRetries});
}

void Peers::dialIfStillAwaited(int peer) {
  if (p_.life.closing() || p_.table.current(peer) || departed(peer) || !p_.ops.awaits(peer)) return;
  log::trace(cfg_.rank, "no link to rank {} yet, which this rank waits for: dialling it", peer);
  linkFor(peer);
}

std::shared_ptr<Link> Peers::linkFor(int peer) {
  if (const auto& l = p_.table.current(peer)) return l;
  if (departed(peer)) return nullptr;
  enforceBudget();
  p_.table.open(peer);
  if (p_.table.awaitingAck(peer))
    p_.table.deferDial(peer);  // R3: dial once our goodbye on the old connection is acknowledged
  else
    dial(peer);
  return p_.table.current(peer);
}

// The soft link budget: at most cfg_.maxLinks open links; a new one (dialled
// or admitted) past it closes the least recently used link that is idle
// (nothing queued, no frame half-read, no receive posted from its peer, so a
// death there still shows) with an idle goodbye. Incoming connections are
// always admitted.
void Peers::enforceBudget() {
  // The rendezvous owns the links it opens until it is done.
  if (p_.life.joining() || p_.table.openCount() < cfg_.maxLinks) return;
  std::vector<char> awaited(static_cast<std::size_t>(cfg_.nranks), 0);
  for (const Op* op : p_.ops.activeSet())
    for (const auto& k : op->posted) awaited[k.src] = 1;
  Link* victim = p_.table.idleVictim(awaited);
  if (!victim) return;
  log::trace(cfg_.rank, "link budget ({} links): closing the idle link to rank {}", cfg_.maxLinks, victim->peer());
  p_.counters.budgetCloses.fetch_add(1, std::memory_order_relaxed);
  victim->sendGoodbye(wire::GoodbyeMode::Idle);
  p_.table.setAside(*victim);
}

void Peers::countDial(int peer) {
  p_.counters.dials.fetch_add(1, std::memory_order_relaxed);
  if (p_.table.epoch(peer) > 0) p_.counters.redials.fetch_add(1, std::memory_order_relaxed);
}

void Peers::sendControl(Link& link, wire::Kind kind, const std::vector<unsigned char>& payload) {
  link.enqueue(link::controlFrame(kind, payload));
}

std::shared_ptr<Link> Peers::controlLink(int peer) {
  if (peer < 0 || peer >= cfg_.nranks || peer == cfg_.rank) return nullptr;
  auto l = linkFor(peer);
  return l && !l->goodbyeSent() ? l : nullptr;
}

bool Peers::sendControlTo(int peer, wire::Kind kind, const std::vector<unsigned char>& payload) {
  auto l = controlLink(peer);
  if (l) sendControl(*l, kind, payload);
  return l != nullptr;
}

bool Peers::sendControlTo(int peer, wire::Kind kind, wire::SharedBytes payload) {
  auto l = controlLink(peer);
  if (l) l->enqueue(link::controlFrame(kind, std::move(payload)));
  return l != nullptr;
}

void Peers::goodbyeFinal(Link& link) {
  link.sendGoodbye(wire::GoodbyeMode::Final);
  if (link.state() == Link::State::Closing) p_.table.setAside(link);
}

void Peers::sayGoodbye(const std::function<bool(int)>& failDialing) {
  std::vector<std::shared_ptr<Link>> current;
  for (int p = 0; p < cfg_.nranks; ++p)
    if (const auto& l = p_.table.current(p)) current.push_back(l);
  for (auto& l : current) {
    if (l->state() == Link::State::Dialing && failDialing(l->peer())) {
      l->fail("shutting down after a failed rendezvous");
      continue;
    }
    goodbyeFinal(*l);
  }
}

void Peers::failAll(const std::string& reason) {
  std::vector<std::shared_ptr<Link>> all;
  p_.table.forEach([&](Link& l) { all.push_back(l.shared_from_this()); });
  for (auto& l : all) l->fail(reason);
}

Error Peers::peerGoneError(int peer, const Op& op) const {
  const auto& st = p_.table.peer(peer);
  std::string why = st.graceful ? failures::closedItsBootstrap() : st.reason;
  return Error(ErrorCode::PeerLost, failures::failure(op.who(), op.name(), failures::lostRank(op.nameOf(peer), why)),
               op.rank(), op.peerOf(peer));
}

// ---- NoticeLinks (for the abort relay) ----

std::vector<int> Peers::openPeers() const {
  std::vector<int> peers;
  for (int p = 0; p < cfg_.nranks; ++p)
    if (const auto& l = p_.table.current(p); l && !l->goodbyeSent()) peers.push_back(p);
  return peers;
}

void Peers::sendOpen(int peer, const std::vector<unsigned char>& payload) {
  // A write that failed at once may have closed an earlier peer's link: look again.
  if (const auto& l = p_.table.current(peer); l && !l->goodbyeSent()) sendControl(*l, wire::Kind::Abort, payload);
}

void Peers::sendDialling(int peer, const std::vector<unsigned char>& payload) {
  auto l = linkFor(peer);
  if (!l || l->goodbyeSent()) return;
  log::trace(cfg_.rank, "abort notice to rank {} down the abort tree", peer);
  sendControl(*l, wire::Kind::Abort, payload);
  if (p_.life.closing()) goodbyeFinal(*l);  // a link opened while closing: it closes behind the notice
}

bool Peers::departed(int peer) const {
  const auto& st = p_.table.peer(peer);
  return st.gone || st.leaving;
}

// ---- link::LinkSink: link events ----

void Peers::onGoodbye(Link& link, wire::GoodbyeMode mode) {
  if (mode == wire::GoodbyeMode::Final) p_.table.peer(link.peer()).leaving = true;
  p_.table.setAside(link);
}

void Peers::onLinkDown(Link& link, const std::string& reason, bool graceful) {
  const int p = link.peer();
  const auto down = p_.table.remove(link, reason, graceful);  // keeps the link alive until this returns
  const auto& st = p_.table.peer(p);
  const bool clean = down.clean;
  if (down.redial) dial(p);  // R3: our goodbye is acknowledged (or the old connection failed); also while shutting down
  // A rank the abort notice was sent to down the tree is gone: its children
  // get the notice from here instead.
  if (st.gone && p_.life.joined()) p_.relay.peerGone(p);
  if (p_.life.closing()) return checkDrained();
  if (!clean && !st.graceful) {
    if (link.remote().empty())
      log::warn(cfg_.rank, "{}", reason);  // never connected: the reason says to whom
    else
      log::warn(cfg_.rank, "lost {}: {}", describeRank(p), reason);
  }
  p_.traffic.failOpsOfPeer(p, st.gone, st.graceful, link);
  // Still waiting on p without a link: learn whether it is still there. A
  // link that broke is dialled again now; one that p closed in order (its
  // budget) is p's to reopen when it sends, so this rank dials only if p has
  // not a moment later (await_watch.hpp) — else p dying before it sends would
  // leave this rank waiting for its deadline.
  if (!st.gone && !p_.table.current(p) && p_.ops.awaits(p)) {
    if (clean)
      p_.awaitWatch.note(p);
    else
      linkFor(p);
  }
  if (p_.life.joining()) rendezvous_->onLinkDown(p, reason, st.graceful || clean);
}

void Peers::onLinkIdle(Link&) {
  if (p_.life.closing()) checkDrained();
}

// Closing is done when every link has closed after its goodbye exchange (so
// every frame before it was read), or its peer aborted (it will not read
// anything any more). The Lifecycle is World's: it tells it through `drained_`.
void Peers::checkDrained() {
  if (!drained_ || p_.life.drained()) return;
  int open = 0;
  p_.table.forEach([&](const Link& l) { open += l.state() != Link::State::Closed && !p_.table.peer(l.peer()).aborted; });
  drained_(open);
}

void Peers::onControlFrame(Link& link, const wire::FrameHeader& h, std::vector<unsigned char>&& payload) {
  try {
    switch (h.kind) {
      case wire::Kind::Abort: {
        auto n = wire::decodeAbortNotice(payload);
        if (n.origin >= static_cast<std::uint32_t>(cfg_.nranks) ||
            (n.lost != wire::kNoRank && n.lost >= static_cast<std::uint32_t>(cfg_.nranks)))
          throw std::invalid_argument("rank out of range");
        p_.table.peer(link.peer()).aborted = true;
        aborted_(n, link.peer());
        if (p_.life.closing()) checkDrained();
        return;
      }
      case wire::Kind::Heartbeat:
        return;
      case wire::Kind::StatusQuery:
        return answerStatus(link, wire::decodeStatusQuery(payload));
      case wire::Kind::StatusAnswer:
        return p_.probe.onAnswer(link.peer(), wire::decodeStatusAnswer(payload));
      case wire::Kind::Credit:
        return p_.traffic.onCredit(link.peer(), wire::Kind::P2P, 0, wire::decodeCredit(payload));
      case wire::Kind::CollectiveCredit: {
        const auto c = wire::decodeCollectiveCredit(payload);
        return p_.traffic.onCredit(link.peer(), wire::Kind::Collective, c.comm, c.bytes);
      }
      default:  // the rendezvous' own frames (Register, Table)
        if (rendezvous_->onFrame(link.peer(), h.kind, std::make_shared<const wire::Bytes>(std::move(payload)))) return;
        link.fail(fmt::format("unexpected {} frame on an established link", wire::kindName(h.kind)));
        return;
    }
  } catch (const std::exception& e) {
    log::warn(cfg_.rank, "malformed {} frame from {}: {}", wire::kindName(h.kind), describeRank(link.peer()),
              e.what());
    link.fail(fmt::format("malformed {} frame: {}", wire::kindName(h.kind), e.what()));
  }
}

// A peer's StallProbe asks where this rank is (statusOf).
void Peers::answerStatus(Link& link, const wire::StatusQuery& q) {
  const auto payload = wire::encode(statusOf(q, p_.ops, p_.sequences));
  if (!link.goodbyeSent())
    sendControl(link, wire::Kind::StatusAnswer, payload);
  else
    sendControlTo(link.peer(), wire::Kind::StatusAnswer, payload);
}

}  // namespace tether
