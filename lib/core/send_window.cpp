#include "core/send_window.hpp"

namespace tether {

std::vector<link::OutFrame> SendWindow::credit(Lane lane, std::uint64_t bytes) {
  std::vector<link::OutFrame> ready;
  lanes_.credit(lane, bytes, [&](link::OutFrame&& f) { ready.push_back(std::move(f)); });
  return ready;
}

std::size_t SendWindow::drop(const link::Owner* owner) {
  return lanes_.dropHeld([&](const Lane&, const link::OutFrame& f) { return f.owner == owner; });
}

std::optional<Lane> SendWindow::heldFor(const link::Owner* owner) const {
  std::optional<Lane> lane;
  lanes_.forEachHeld([&](const Lane& l, const link::OutFrame& f) {
    if (f.owner == owner && !lane) lane = l;
  });
  return lane;
}

std::vector<link::Owner*> SendWindow::ownersHeldFor(int peer) const {
  std::vector<link::Owner*> owners;
  lanes_.forEachHeld([&](const Lane& l, const link::OutFrame& f) {
    if (l.peer == peer) owners.push_back(f.owner);
  });
  return owners;
}

std::vector<link::Owner*> SendWindow::ownersHeld() const {
  std::vector<link::Owner*> owners;
  lanes_.forEachHeld([&](const Lane&, const link::OutFrame& f) { owners.push_back(f.owner); });
  return owners;
}

void SendWindow::forget(int peer) {
  lanes_.eraseLanes([&](const Lane& l, bool) { return l.peer == peer; });
}

void SendWindow::forgetComm(std::uint64_t comm) {
  lanes_.eraseLanes([&](const Lane& l, bool nothingHeld) { return l.comm == comm && nothingHeld; });
}

}  // namespace tether
