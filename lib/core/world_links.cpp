// The world's side of its links: opened lazily (or by the rendezvous;
// admitted by LinkAdmission, admission.hpp), closed with a lingering goodbye and
// reopened under the link budget by the rules of docs/ordering.md ("Closing
// and reopening a link", R1-R8, checked by the model in test/model/; the
// LinkTable holds the links and decides by those rules, this file acts on
// what it decides); and the control frames that travel on them.
#include <fmt/format.h>

#include "base/bytes.hpp"
#include "base/endpoint.hpp"
#include "base/log.hpp"
#include "core/world.hpp"
#include "link/tcp_stream.hpp"
#include "wire/notice.hpp"

namespace tether {

using link::Link;

// After the rendezvous every peer listens: a refused dial is its loss at
// once, a dial it keeps cutting (reset, closed) after a second of retries.
// A silent one (a frozen or overloaded peer: the kernel accepts, nobody
// answers) is no proof of death: it is tried past the call's deadline, so
// the call ends first with Timeout naming that rank (its stall probe, at
// most 1 s), not with a PeerLost for a rank that may still be alive.
void World::dial(int peer) {
  constexpr auto kBrokenRetries = std::chrono::seconds(1);
  constexpr auto kPastTheProbe = std::chrono::seconds(2);
  const auto now = Clock::now();
  countDial(peer);
  connector_.dial(peer, table_.epoch(peer), link::tcpEndpoint(address(peer)),
                  {now + cfg_.timeout + kPastTheProbe, /*retryRefused=*/false, now + kBrokenRetries});
}

void World::dialIfStillAwaited(int peer) {
  if (life_.closing() || table_.current(peer) || table_.peer(peer).gone || table_.peer(peer).leaving ||
      !ops_.awaits(peer))
    return;
  log::trace(rank(), "no link to rank {} yet, which this rank waits for: dialling it", peer);
  linkFor(peer);
}

std::shared_ptr<Link> World::linkFor(int peer) {
  if (const auto& l = table_.current(peer)) return l;
  if (table_.peer(peer).gone || table_.peer(peer).leaving) return nullptr;
  enforceBudget();
  table_.open(peer);
  if (table_.awaitingAck(peer))
    table_.deferDial(peer);  // R3: dial once our goodbye on the old connection is acknowledged
  else
    dial(peer);
  return table_.current(peer);
}

// The soft link budget: at most cfg_.maxLinks open links; a new one (dialled
// or admitted) past it closes the least recently used link that is idle
// (nothing queued, no frame half-read, no receive posted from its peer, so a
// death there still shows) with an idle goodbye. Incoming connections are
// always admitted.
void World::enforceBudget() {
  // The rendezvous owns the links it opens until it is done.
  if (life_.joining() || table_.openCount() < cfg_.maxLinks) return;
  std::vector<char> awaited(static_cast<std::size_t>(nranks()), 0);
  for (const Op* op : ops_.activeSet())
    for (const auto& k : op->posted) awaited[k.src] = 1;
  Link* victim = table_.idleVictim(awaited);
  if (!victim) return;
  log::trace(rank(), "link budget ({} links): closing the idle link to rank {}", cfg_.maxLinks, victim->peer());
  links_.budgetCloses.fetch_add(1, std::memory_order_relaxed);
  victim->sendGoodbye(wire::GoodbyeMode::Idle);
  table_.setAside(*victim);
}

void World::countDial(int peer) {
  links_.dials.fetch_add(1, std::memory_order_relaxed);
  if (table_.epoch(peer) > 0) links_.redials.fetch_add(1, std::memory_order_relaxed);
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

std::string World::describeRank(int worldRank) const { return table_.describe(worldRank); }

// ---- link::LinkSink: link events ----

void World::onGoodbye(Link& link, wire::GoodbyeMode mode) {
  if (mode == wire::GoodbyeMode::Final) table_.peer(link.peer()).leaving = true;
  table_.setAside(link);
}

void World::onLinkDown(Link& link, const std::string& reason, bool graceful) {
  const int p = link.peer();
  const auto down = table_.remove(link, reason, graceful);  // keeps the link alive until this returns
  const auto& st = table_.peer(p);
  const bool clean = down.clean;
  if (down.redial) dial(p);  // R3: our goodbye is acknowledged (or the old connection failed); also while shutting down
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
  if (!clean && !st.gone && !table_.current(p) && ops_.awaits(p)) linkFor(p);  // learn whether it is still there
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
  table_.forEach([&](const Link& l) { open += l.state() != Link::State::Closed && !table_.peer(l.peer()).aborted; });
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
        table_.peer(link.peer()).aborted = true;
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
      case wire::Kind::Credit:
        return onCredit(link.peer(), wire::decodeCredit(payload));
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

// A peer's StallProbe asks where this rank is (statusOf).
void World::answerStatus(link::Link& link, const wire::StatusQuery& q) {
  const auto payload = wire::encode(statusOf(q, ops_, sequences_));
  if (!link.goodbyeSent())
    sendControl(link, wire::Kind::StatusAnswer, payload);
  else
    sendControlTo(link.peer(), wire::Kind::StatusAnswer, payload);
}

// An observer (tether-status) asks this rank as a whole, and for every
// rank's address once the world holds them.
ObserverDesk::Answers World::observerAnswers() {
  ObserverDesk::Answers a;
  a.status = [this](const wire::StatusQuery& q) {
    RankFacts facts{rank(), nranks(), table_.openCount(), lastError_, Clock::now()};
    if (facts.lastError.empty() && abort_.aborted()) facts.lastError = abortedError("this world").what();
    return statusOfRank(q.id, ops_, facts);
  };
  a.table = [this]() -> std::optional<wire::Bytes> {
    if (!life_.joined()) return std::nullopt;
    std::vector<PeerAddress> all;
    all.reserve(static_cast<std::size_t>(nranks()));
    for (int r = 0; r < nranks(); ++r) all.push_back(address(r));
    return wire::encodeTable(all);
  };
  return a;
}

}  // namespace tether
