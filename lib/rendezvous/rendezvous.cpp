// Rendezvous: every rank dials the root (rank 0, at the UniqueId's address)
// over what becomes their ordinary link, registers its listen address, and
// waits for the table of all addresses. The root answers when all ranks have
// registered. Links between other ranks open lazily later.
#include <fmt/format.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include "base/endpoint.hpp"
#include "base/log.hpp"
#include "core/world.hpp"
#include "link/link.hpp"

namespace tether {

void World::startRendezvous() {
  registered_.assign(nranks(), std::nullopt);
  if (rank() == 0) {
    registered_[0] = self_;
    registeredCount_ = 1;
    if (nranks() == 1) {
      table_ = {self_};
      finishInit(nullptr);
    }
    return;
  }
  auto link = std::make_shared<Link>(*this, 0);
  links_[0] = link;
  wire::Register reg{static_cast<std::uint32_t>(rank()), self_};
  sendControl(*link, wire::Kind::Register, wire::encode(reg));  // flushed once the link is up
  asio::co_spawn(io_, dialPeer(0, cfg_.root, /*retryRefused=*/true), asio::detached);
}

void World::onRegister(int peer, const wire::Register& r) {
  if (rank() != 0 || initComplete_ || static_cast<int>(r.rank) != peer || registered_[peer]) {
    log::warn(rank(), "ignored an unexpected registration from {} (claims rank {})", describeRank(peer), r.rank);
    return;
  }
  registered_[peer] = r.address;
  ++registeredCount_;
  log::trace(rank(), "rank {} registered ({}/{})", peer, registeredCount_, nranks());
  if (registeredCount_ < nranks()) return;
  table_.clear();
  for (auto& a : registered_) table_.push_back(*a);
  auto bytes = wire::encodeTable(table_);
  for (int p = 1; p < nranks(); ++p) sendControl(*links_[p], wire::Kind::Table, bytes);
  log::info(rank(), "rendezvous complete: {} ranks", nranks());
  finishInit(nullptr);
}

void World::onTable(int peer, std::vector<PeerAddress> table) {
  if (rank() == 0 || peer != 0 || initComplete_) {
    log::warn(rank(), "ignored an unexpected address table from {}", describeRank(peer));
    return;
  }
  table_ = std::move(table);
  finishInit(nullptr);
}

void World::finishInit(std::exception_ptr e) {
  if (initComplete_) return;
  initComplete_ = true;
  initOk_ = !e;
  initDone_.complete(e);
}

std::string World::rendezvousTimeoutText() const {
  if (rank() == 0) {
    std::vector<int> missing;
    for (int r = 0; r < nranks(); ++r)
      if (!registered_[r]) missing.push_back(r);
    return fmt::format("rank 0: rendezvous timed out after {} ms: {} of {} ranks registered; missing ranks: {}",
                       cfg_.timeout.count(), registeredCount_, nranks(), fmt::join(missing, ", "));
  }
  bool connected = links_[0] && links_[0]->state() == Link::State::Up;
  return fmt::format("rank {}: rendezvous timed out after {} ms: {} (root at {})", rank(), cfg_.timeout.count(),
                     connected ? "registered with the root, but not all ranks arrived"
                               : "could not reach the root",
                     toString(cfg_.root));
}

}  // namespace tether
