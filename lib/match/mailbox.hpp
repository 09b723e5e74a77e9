// The TCP world's mailbox: the shared matching (tether/detail/match/
// mailbox.hpp) under the frame's full key (key.hpp), for receives posted
// with the caller's buffer and frames kept with their header — the type the
// shared call table holds (tether/detail/core/frame_calls.hpp). Used only on
// the progress thread; no locks. Its code is compiled once, in this
// layer's library.
#pragma once

#include "base/layer.hpp"
#include "match/key.hpp"
#include "tether/detail/match/mailbox.hpp"
#include "wire/frame.hpp"

TETHER_LAYER(2, "match");

namespace tether::match {

using Posted = detail::match::PostedReceive;
using Stashed = detail::match::StashedFrame<wire::FrameHeader>;
using Mailbox = detail::match::Mailbox<Key, KeyHash, Posted, Stashed>;

}  // namespace tether::match

// Compiled once, in this layer's library (mailbox.cpp).
extern template class tether::detail::match::Mailbox<tether::match::Key, tether::match::KeyHash, tether::match::Posted,
                                                     tether::match::Stashed>;
