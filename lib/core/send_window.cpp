#include "core/send_window.hpp"

#include <algorithm>
#include <utility>

namespace tether {

// Past a full window only while a quarter window or more is outstanding: the
// peer keeps up to kCreditBatch (at most a quarter window) of credit until it
// has that much to return, so a message must not wait for credit while no
// more than that is outstanding — it could wait for credit that never comes.
bool SendWindow::fits(std::uint64_t outstanding, std::uint64_t cost) const {
  return outstanding < bytes_ / 4 || outstanding + cost <= bytes_;
}

bool SendWindow::admit(int peer, std::uint64_t payload) {
  Peer& p = peers_[peer];
  const std::uint64_t c = cost(payload);
  if (!p.held.empty() || !fits(p.outstanding, c)) return false;
  p.outstanding += c;
  return true;
}

void SendWindow::hold(int peer, link::OutFrame frame) { peers_[peer].held.push_back(std::move(frame)); }

std::vector<link::OutFrame> SendWindow::credit(int peer, std::uint64_t bytes) {
  std::vector<link::OutFrame> ready;
  auto it = peers_.find(peer);
  if (it == peers_.end()) return ready;
  Peer& p = it->second;
  p.outstanding -= std::min(bytes, p.outstanding);
  while (!p.held.empty()) {
    const std::uint64_t c = cost(p.held.front().len);
    if (!fits(p.outstanding, c)) break;
    p.outstanding += c;
    ready.push_back(std::move(p.held.front()));
    p.held.pop_front();
  }
  return ready;
}

std::size_t SendWindow::drop(const link::Owner* owner) {
  std::size_t n = 0;
  for (auto& [peer, p] : peers_) {
    const auto before = p.held.size();
    p.held.erase(std::remove_if(p.held.begin(), p.held.end(), [&](const link::OutFrame& f) { return f.owner == owner; }),
                 p.held.end());
    n += before - p.held.size();
  }
  return n;
}

int SendWindow::heldFor(const link::Owner* owner) const {
  for (const auto& [peer, p] : peers_)
    if (std::any_of(p.held.begin(), p.held.end(), [&](const link::OutFrame& f) { return f.owner == owner; }))
      return peer;
  return -1;
}

std::vector<link::Owner*> SendWindow::ownersHeldFor(int peer) const {
  std::vector<link::Owner*> owners;
  if (auto it = peers_.find(peer); it != peers_.end())
    for (const auto& f : it->second.held) owners.push_back(f.owner);
  return owners;
}

std::vector<link::Owner*> SendWindow::ownersHeld() const {
  std::vector<link::Owner*> owners;
  for (const auto& [peer, p] : peers_)
    for (const auto& f : p.held) owners.push_back(f.owner);
  return owners;
}

std::uint64_t SendWindow::unreceived(int peer) const {
  auto it = peers_.find(peer);
  return it == peers_.end() ? 0 : it->second.outstanding;
}

void SendWindow::forget(int peer) { peers_.erase(peer); }

std::uint64_t SendWindow::received(int peer, std::uint64_t payload) {
  Peer& p = peers_[peer];
  p.owed += cost(payload);
  if (p.owed < kCreditBatch) return 0;
  return std::exchange(p.owed, 0);
}

}  // namespace tether
