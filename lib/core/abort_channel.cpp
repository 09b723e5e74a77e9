#include "core/abort_channel.hpp"

#include <fmt/format.h>

#include "rendezvous/rendezvous.hpp"

#include "tether/detail/core/failures.hpp"

namespace tether {

namespace failures = detail::core::failures;

void AbortChannel::record(const wire::AbortNotice& n) {
  std::lock_guard lock(mutex_);
  if (state_.record(static_cast<int>(n.origin), n.reason)) lost_ = n.lost;
  aborted_.store(true);
}

Error AbortChannel::abortedError(const std::string& opName) const {
  std::lock_guard lock(mutex_);
  return state_.error(failures::rankName(rank_), opName, rank_, rank_);
}

Error AbortChannel::abortedError(const std::string& opName, const detail::core::RankNames& names) const {
  std::lock_guard lock(mutex_);
  return state_.error(names.who(), opName, names.rank(), rank_);
}

bool AbortChannel::beginHandling(const wire::AbortNotice& n) {
  if (handled_) return false;
  handled_ = true;
  record(n);
  return true;
}

std::vector<unsigned char> AbortChannel::payload() const { return wire::encode(notice()); }

void AbortChannel::addAround(int r, const std::function<bool(int)>& unavailable, std::vector<int>& out) {
  if (r == rank_) return;
  if (!unavailable(r)) {
    if (!sentTo(r)) markSent(r), out.push_back(r);
    return;
  }
  for (int c : rdv::treeChildren(r, nranks_, kRadix)) addAround(c, unavailable, out);
}

std::vector<int> AbortChannel::treeTargets(bool started, const std::function<bool(int)>& unavailable) {
  std::vector<int> out;
  if (started && rank_ != 0) addAround(0, unavailable, out);
  for (int c : rdv::treeChildren(rank_, nranks_, kRadix)) addAround(c, unavailable, out);
  return out;
}

std::vector<int> AbortChannel::reroute(int peer, const std::function<bool(int)>& unavailable) {
  std::vector<int> out;
  if (!handled_ || !sentTo(peer)) return out;
  for (int c : rdv::treeChildren(peer, nranks_, kRadix)) addAround(c, unavailable, out);
  return out;
}

}  // namespace tether
