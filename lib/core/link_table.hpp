// The link table: one current link per peer, the lingering ones set aside
// after a goodbye, epochs, what each peer is known to have done, and the
// close/reopen rules R1-R8 of docs/ordering.md that decide on them (the
// admission verdict, the deferred dial, held hellos, the budget's victim).
// It opens, sets aside and forgets links; the world decides when (and dials).
// Progress thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/layer.hpp"
#include "link/connector.hpp"
#include "link/link.hpp"

TETHER_LAYER(6, "core");

namespace tether {

class LinkTable {
 public:
  struct PeerState {
    bool gone = false;      // no more links to it: it left or died
    bool graceful = false;  // it left in order (a final goodbye)
    bool leaving = false;   // its final goodbye was read (or it refused us as shutting down)
    bool aborted = false;   // the peer sent an abort notice: it will not read our goodbye
    std::string reason;
  };

  LinkTable(boost::asio::io_context& io, link::LinkSink& sink, int rank, int nranks, std::uint64_t maxPayload);

  int nranks() const { return static_cast<int>(links_.size()); }
  // The current link to `peer` (Dialing or Up); null if none.
  const std::shared_ptr<link::Link>& current(int peer) const { return links_[static_cast<std::size_t>(peer)]; }
  PeerState& peer(int p) { return peers_[static_cast<std::size_t>(p)]; }
  const PeerState& peer(int p) const { return peers_[static_cast<std::size_t>(p)]; }
  // Peers gone without a final goodbye (lost or died) so far.
  int diedCount() const { return died_; }
  std::uint32_t epoch(int peer) const { return epoch_[static_cast<std::size_t>(peer)]; }

  // A new current link to `peer` (Dialing, this epoch).
  link::Link& open(int peer);
  // Marks `link` as just used (least-recently-used choices).
  void touch(link::Link& link) { link.lastUsed = ++useClock_; }
  // Sets a link aside after a goodbye was sent or read on it (R1): it only
  // lingers now, and frames to its peer go to a new link (epoch + 1, R5).
  void setAside(link::Link& link);
  // Our goodbye on a lingering link to `peer` is not acknowledged yet: we
  // may not dial `peer` (R3) and must hold its hellos (R4).
  bool awaitingAck(int peer) const;
  // R3: the current link to `peer` dials once our goodbye is acknowledged.
  void deferDial(int peer) { dialDeferred_[static_cast<std::size_t>(peer)] = 1; }
  // Open links, current and lingering.
  int openCount() const;

  // R4-R7: the verdict on a hello from `peer` for connection `epoch`.
  // `closing`: this rank shuts down. Sets `*duplicate` when another process
  // claims a rank that is connected (or gone).
  link::Verdict admit(int peer, std::uint32_t epoch, bool closing, bool* duplicate) const;
  // A dial's outcome belongs to the link it was started for (R5): the
  // current link to `peer`, still dialling connection `epoch`; else null.
  std::shared_ptr<link::Link> dialing(int peer, std::uint32_t epoch) const;
  // R4: holds a hello from `peer` until its predecessor closes (or `deadline`).
  std::shared_ptr<boost::asio::steady_timer> holdHello(int peer, link::Clock::time_point deadline);

  // The link closed: it leaves the table, and the peer's state records what
  // that says about it (gone, in order, or just an idle close).
  struct Down {
    std::shared_ptr<link::Link> keep;  // the link, alive until the caller is done
    bool clean = false;                // closed after the goodbye exchange
    bool redial = false;               // R3: the deferred dial of the current link may go now
  };
  Down remove(link::Link& link, const std::string& reason, bool graceful);

  // The budget's victim: the least recently used current link that is Up
  // and idle (nothing queued, no frame half-read) to a peer no receive waits
  // for (`awaited[peer]`); null if none.
  link::Link* idleVictim(const std::vector<char>& awaited) const;

  // "rank 3 (10.0.0.7:41235)".
  std::string describe(int peer) const;
  // `peer`'s address as its current link has it ("10.0.0.7:41235"), or "".
  std::string remoteOf(int peer) const;

  // Current and lingering links.
  template <class F>
  void forEach(F&& f) const {
    for (const auto& l : links_)
      if (l) f(*l);
    for (const auto& peer : lingering_)
      for (const auto& l : peer) f(*l);
  }
  // The current and lingering links to one peer.
  template <class F>
  void forEachTo(int peer, F&& f) const {
    if (const auto& l = links_[static_cast<std::size_t>(peer)]) f(*l);
    for (const auto& l : lingering_[static_cast<std::size_t>(peer)]) f(*l);
  }

 private:
  boost::asio::io_context& io_;
  link::LinkSink& sink_;
  const int rank_;
  const std::uint64_t maxPayload_;
  std::vector<std::shared_ptr<link::Link>> links_;                   // current link per peer (Dialing/Up)
  std::vector<std::vector<std::shared_ptr<link::Link>>> lingering_;  // set aside, closing (R1, R2)
  std::vector<std::uint32_t> epoch_;                                 // connections set aside per peer (R5)
  std::vector<char> dialDeferred_;  // a current link waits to dial until our goodbye is acked (R3)
  std::vector<std::vector<std::shared_ptr<boost::asio::steady_timer>>> predecessorWaits_;  // held hellos (R4)
  std::uint64_t useClock_ = 0;
  int died_ = 0;  // diedCount()
  std::vector<PeerState> peers_;
};

}  // namespace tether
