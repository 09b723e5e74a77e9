// Noticing a peer that is gone before any link to it was opened. Links open
// lazily, by the sender: a rank that only waits to receive from a peer has
// no link to it, and would learn of that peer's death only at its deadline.
// A receive posted from a peer without a link is noted here, and so is a
// peer awaited when it closes its link in order (its link budget: it would
// dial back to send); if, a moment later, it is still awaited and still has
// no link, the world dials it. After
// the rendezvous every rank is known to listen, so the dial either links (the
// sender was only late, and its frames will use this link) or is refused —
// the peer's loss, PeerLost naming it at once. The moment's delay keeps the
// usual case (the sender's own dial arrives first) free of a second dial.
// Progress thread only; an armed timer only while something is noted.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <vector>

#include "base/layer.hpp"

TETHER_LAYER(6, "core");

namespace tether {

class AwaitWatch {
 public:
  static constexpr std::chrono::milliseconds kAfter{200};

  // `check(peer)` runs kAfter after `peer` was noted (once per noting round).
  AwaitWatch(boost::asio::io_context& io, std::function<void(int)> check);
  void note(int peer);

 private:
  boost::asio::steady_timer timer_;
  std::function<void(int)> check_;
  std::vector<int> noted_, checking_;
  bool armed_ = false;
};

}  // namespace tether
