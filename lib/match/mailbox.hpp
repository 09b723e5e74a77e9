// The TCP world's mailbox: the shared matching (tether/detail/match/
// mailbox.hpp) under the frame's full key (key.hpp), for receives posted
// with the caller's buffer and frames kept with their header. Used only on
// the progress thread; no locks.
#pragma once

#include <vector>

#include "base/layer.hpp"
#include "match/key.hpp"
#include "tether/detail/match/mailbox.hpp"
#include "wire/frame.hpp"

TETHER_LAYER(2, "match");

namespace tether::match {

// A receive posted with the caller's buffer, and a frame kept with its
// header: the shapes of the shared call table (tether/detail/match/mailbox.hpp, used by
// tether/detail/core/call_table.hpp).
using Posted = detail::match::PostedReceive;
using Stashed = detail::match::StashedFrame<wire::FrameHeader>;

class Mailbox : public detail::match::Mailbox<Key, KeyHash, Posted, Stashed> {
 public:
  // Returns false (and keeps nothing) if a collective frame with this exact key
  // is already waiting: a duplicate.
  bool stash(const Key& k, Stashed f);
};

}  // namespace tether::match
