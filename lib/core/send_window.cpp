#include "core/send_window.hpp"

#include <algorithm>
#include <utility>

namespace tether {

bool SendWindow::admit(Lane lane, std::uint64_t payload) {
  State& s = lanes_[lane];
  const std::uint64_t c = cost(payload);
  if (!s.held.empty() || !fits(s.outstanding, c)) return false;
  s.outstanding += c;
  return true;
}

void SendWindow::hold(Lane lane, link::OutFrame frame) { lanes_[lane].held.push_back(std::move(frame)); }

std::vector<link::OutFrame> SendWindow::credit(Lane lane, std::uint64_t bytes) {
  std::vector<link::OutFrame> ready;
  auto it = lanes_.find(lane);
  if (it == lanes_.end()) return ready;
  State& s = it->second;
  s.outstanding -= std::min(bytes, s.outstanding);
  while (!s.held.empty()) {
    const std::uint64_t c = cost(s.held.front().len);
    if (!fits(s.outstanding, c)) break;
    s.outstanding += c;
    ready.push_back(std::move(s.held.front()));
    s.held.pop_front();
  }
  return ready;
}

std::size_t SendWindow::drop(const link::Owner* owner) {
  std::size_t n = 0;
  for (auto& [lane, s] : lanes_) {
    const auto before = s.held.size();
    s.held.erase(
        std::remove_if(s.held.begin(), s.held.end(), [&](const link::OutFrame& f) { return f.owner == owner; }),
        s.held.end());
    n += before - s.held.size();
  }
  return n;
}

std::optional<Lane> SendWindow::heldFor(const link::Owner* owner) const {
  for (const auto& [lane, s] : lanes_)
    if (std::any_of(s.held.begin(), s.held.end(), [&](const link::OutFrame& f) { return f.owner == owner; }))
      return lane;
  return std::nullopt;
}

std::vector<link::Owner*> SendWindow::ownersHeldFor(int peer) const {
  std::vector<link::Owner*> owners;
  for (const auto& [lane, s] : lanes_)
    if (lane.peer == peer)
      for (const auto& f : s.held) owners.push_back(f.owner);
  return owners;
}

std::vector<link::Owner*> SendWindow::ownersHeld() const {
  std::vector<link::Owner*> owners;
  for (const auto& [lane, s] : lanes_)
    for (const auto& f : s.held) owners.push_back(f.owner);
  return owners;
}

std::uint64_t SendWindow::unreceived(Lane lane) const {
  auto it = lanes_.find(lane);
  return it == lanes_.end() ? 0 : it->second.outstanding;
}

template <class Pred>
void SendWindow::eraseIf(Pred&& pred) {
  for (auto it = lanes_.begin(); it != lanes_.end();)
    it = pred(it->first, it->second) ? lanes_.erase(it) : std::next(it);
}

void SendWindow::forget(int peer) {
  eraseIf([&](const Lane& l, const State&) { return l.peer == peer; });
}

void SendWindow::forgetComm(std::uint64_t comm) {
  eraseIf([&](const Lane& l, const State& s) { return l.comm == comm && s.held.empty(); });
}

std::uint64_t SendWindow::received(Lane lane, std::uint64_t payload) {
  State& s = lanes_[lane];
  s.owed += cost(payload);
  if (s.owed < batch_) return 0;
  return std::exchange(s.owed, 0);
}

}  // namespace tether
