#include "core/abort_relay.hpp"

#include "base/log.hpp"
#include "tether/detail/core/collective_calls.hpp"
#include "tether/error.hpp"

namespace tether {

bool AbortRelay::handle(const wire::AbortNotice& n, bool notifyPeers, int from, bool joined) {
  if (!channel_.beginHandling(n)) return false;
  const int origin = static_cast<int>(n.origin);
  if (origin != rank_) log::warn(rank_, "rank {} aborted: {}", origin, n.reason);
  if (notifyPeers) send(from, joined);
  return true;
}

// Over every open link (fast, as far as they reach), then down the abort tree
// (AbortChannel) so that it reaches every rank whatever the link budget has
// closed. Needs the rendezvous table to dial; before it, open links only.
void AbortRelay::send(int from, bool joined) {
  const auto n = channel_.notice();
  const auto payload = wire::encode(n);
  const int origin = static_cast<int>(n.origin);
  for (int r : {origin, from})
    if (r >= 0 && r < nranks_) channel_.markSent(r);  // it has the notice and forwards it itself
  for (int p : links_.openPeers())
    if (p != origin && p != from) {
      channel_.markSent(p);
      links_.sendOpen(p, payload);
    }
  if (!joined) return;
  for (int t : channel_.treeTargets(origin == rank_, [this](int r) { return unavailable(r); }))
    links_.sendDialling(t, payload);
}

void AbortRelay::peerGone(int peer) {
  if (!channel_.handled()) return;
  for (int t : channel_.reroute(peer, [this](int r) { return unavailable(r); }))
    links_.sendDialling(t, channel_.payload());
}

bool AbortRelay::unavailable(int peer) const {
  return links_.departed(peer) || static_cast<std::uint32_t>(peer) == channel_.notice().lost;
}

std::optional<wire::AbortNotice> AbortRelay::afterFailedCollective(std::exception_ptr e) const {
  if (channel_.handled()) return std::nullopt;
  try {
    std::rethrow_exception(e);
  } catch (const Error& err) {
    const bool lost = err.code() == ErrorCode::PeerLost && err.peer() >= 0 && err.peer() < nranks_;
    if (detail::core::failureAbortsWorld(err, nranks_))
      return wire::AbortNotice{static_cast<std::uint32_t>(rank_), err.what(),
                               lost ? static_cast<std::uint32_t>(err.peer()) : wire::kNoRank};
  } catch (...) {
  }
  return std::nullopt;
}

}  // namespace tether
