#include "match/mailbox.hpp"

#include <algorithm>

namespace tether::match {

std::optional<Posted> Mailbox::claimPosted(const Key& k) {
  auto it = posted_.find(k);
  if (it == posted_.end()) return std::nullopt;
  Posted p = it->second.front();
  it->second.pop_front();
  if (it->second.empty()) posted_.erase(it);
  --postedCount_;
  return p;
}

bool Mailbox::unpost(const Key& k, const void* owner) {
  auto it = posted_.find(k);
  if (it == posted_.end()) return false;
  auto& q = it->second;
  auto pos = std::find_if(q.begin(), q.end(), [&](const Posted& p) { return p.owner == owner; });
  if (pos == q.end()) return false;
  q.erase(pos);
  if (q.empty()) posted_.erase(it);
  --postedCount_;
  return true;
}

bool Mailbox::stash(const Key& k, Stashed f) {
  auto& q = stashed_[k];
  if (k.kind == wire::Kind::Collective && !q.empty()) return false;
  q.push_back(std::move(f));
  ++stashedCount_;
  return true;
}

std::optional<Stashed> Mailbox::takeStashed(const Key& k) {
  auto it = stashed_.find(k);
  if (it == stashed_.end()) return std::nullopt;
  Stashed s = std::move(it->second.front());
  it->second.pop_front();
  if (it->second.empty()) stashed_.erase(it);
  --stashedCount_;
  return s;
}

}  // namespace tether::match
