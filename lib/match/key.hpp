// The matching key: every world's (tether/detail/match/key.hpp), named here
// for the TCP world's layers.
#pragma once

#include "base/layer.hpp"
#include "tether/detail/match/key.hpp"
#include "wire/frame.hpp"

TETHER_LAYER(2, "match");

namespace tether::match {

using detail::match::Key;
using detail::match::KeyHash;
using detail::match::keyOf;
using detail::match::stashedOnce;

}  // namespace tether::match
