#include "core/link_table.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "tether/detail/core/failures.hpp"

namespace tether {

namespace failures = detail::core::failures;

using link::Link;

LinkTable::LinkTable(boost::asio::io_context& io, link::LinkSink& sink, int rank, int nranks, std::uint64_t maxPayload)
    : io_(io),
      sink_(sink),
      rank_(rank),
      maxPayload_(maxPayload),
      links_(nranks),
      lingering_(nranks),
      epoch_(nranks, 0),
      dialDeferred_(nranks, 0),
      predecessorWaits_(nranks),
      peers_(nranks) {}

Link& LinkTable::open(int peer) {
  link::LinkLimits limits{maxPayload_, rank_};
  auto& l = links_[static_cast<std::size_t>(peer)];
  l = std::make_shared<Link>(io_, sink_, peer, epoch_[static_cast<std::size_t>(peer)], limits);
  touch(*l);
  return *l;
}

void LinkTable::setAside(Link& link) {
  const auto p = static_cast<std::size_t>(link.peer());
  if (links_[p].get() != &link) return;
  lingering_[p].push_back(std::move(links_[p]));
  links_[p].reset();
  ++epoch_[p];
}

bool LinkTable::awaitingAck(int peer) const {
  const auto& lingering = lingering_[static_cast<std::size_t>(peer)];
  return std::any_of(lingering.begin(), lingering.end(),
                     [](const auto& l) { return l->goodbyeSent() && !l->ackRead(); });
}

int LinkTable::openCount() const {
  int n = 0;
  forEach([&](const Link& l) { n += l.state() != Link::State::Closed; });
  return n;
}

link::Verdict LinkTable::admit(int peer, std::uint32_t epoch, bool closing, bool* duplicate) const {
  using link::Verdict;
  using wire::RejectCode;
  *duplicate = false;
  if (peer < 0 || peer >= nranks() || peer == rank_)
    return Verdict::refuse(RejectCode::BadRank,
                           fmt::format("rank {} is not a peer of rank {} in a world of {}", peer, rank_, nranks()));
  if (epoch != this->epoch(peer))  // R5: dialled before a close completed here
    return Verdict::refuse(RejectCode::Stale,
                           fmt::format("connection {} of rank {} is closed ({} now)", epoch, peer, this->epoch(peer)));
  const auto& l = current(peer);  // R6: only the current link counts
  if (closing && !l) return Verdict::refuse(RejectCode::ShuttingDown, "this rank is shutting down");  // R7
  if (awaitingAck(peer)) return Verdict::wait();                                                      // R4
  if (l && l->state() == Link::State::Up && l->dialedByUs() && peer > rank_)
    return Verdict::refuse(RejectCode::Simultaneous, "both ranks dialled; the lower rank's connection is kept");
  if (this->peer(peer).gone || (l && l->state() == Link::State::Up)) {
    // Two processes claim the same rank: the job is misconfigured.
    *duplicate = true;
    return Verdict::refuse(RejectCode::DuplicateRank,
                           fmt::format("rank {} is already connected{}", peer,
                                       l && !l->remote().empty() ? " from " + l->remote() : std::string()));
  }
  if (l && l->state() == Link::State::Dialing && peer > rank_)
    return Verdict::refuse(RejectCode::Simultaneous, "both ranks dialled; the lower rank's connection is kept");
  return Verdict::welcome();
}

std::shared_ptr<Link> LinkTable::dialing(int peer, std::uint32_t epoch) const {
  const auto& l = current(peer);
  if (!l || l->epoch() != epoch || l->state() != Link::State::Dialing) return nullptr;
  return l;
}

std::shared_ptr<boost::asio::steady_timer> LinkTable::holdHello(int peer, link::Clock::time_point deadline) {
  auto timer = std::make_shared<boost::asio::steady_timer>(io_, deadline);
  predecessorWaits_[static_cast<std::size_t>(peer)].push_back(timer);
  return timer;
}

LinkTable::Down LinkTable::remove(Link& link, const std::string& reason, bool graceful) {
  const auto p = static_cast<std::size_t>(link.peer());
  Down down;
  auto& lingering = lingering_[p];
  auto it = std::find_if(lingering.begin(), lingering.end(), [&](const auto& l) { return l.get() == &link; });
  if (it != lingering.end()) {
    down.keep = *it;
    lingering.erase(it);
    for (auto& t : predecessorWaits_[p]) t->cancel();  // R4: held hellos may proceed
    predecessorWaits_[p].clear();
  } else if (links_[p].get() == &link) {
    down.keep = std::move(links_[p]);
    links_[p].reset();
  }
  auto& st = peers_[p];
  down.clean = link.closedAfterGoodbye();
  if (st.leaving) {
    // Its final goodbye was read (or it refused us as shutting down): it left in order.
    if (!st.gone) st.gone = true, st.graceful = true, st.reason = failures::closedItsBootstrap();
  } else if (!down.clean && !link.idleClose() && !link.goodbyeSent()) {
    // A connection that broke without a goodbye: the peer is lost.
    if (!st.gone) {
      st.gone = true, st.graceful = graceful, st.reason = reason;
      if (!graceful) ++died_;
    }
  }
  // Otherwise an idle close (clean, or broken while lingering): the peer may
  // be dialled again; a dial reveals whether it is still there.
  if (dialDeferred_[p] && !awaitingAck(link.peer()) && links_[p] && links_[p]->state() == Link::State::Dialing) {
    dialDeferred_[p] = 0;
    down.redial = true;  // R3: our goodbye is acknowledged (or the old connection failed)
  }
  return down;
}

Link* LinkTable::idleVictim(const std::vector<char>& awaited) const {
  Link* victim = nullptr;
  for (const auto& l : links_)
    if (l && l->state() == Link::State::Up && l->idle() && !l->midFrame() &&
        !awaited[static_cast<std::size_t>(l->peer())] && (!victim || l->lastUsed < victim->lastUsed))
      victim = l.get();
  return victim;
}

std::string LinkTable::remoteOf(int peer) const {
  if (peer < 0 || peer >= nranks()) return std::string();
  const auto& l = current(peer);
  return l ? l->remote() : std::string();
}

std::string LinkTable::describe(int peer) const {
  const std::string remote = remoteOf(peer);
  return remote.empty() ? fmt::format("rank {}", peer) : fmt::format("rank {} ({})", peer, remote);
}

}  // namespace tether
