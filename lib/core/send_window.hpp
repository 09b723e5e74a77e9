// Send windows (docs/design.md, "Bounded point-to-point" and "Bounded
// collectives"): both worlds' (tether/detail/core/send_windows.hpp), over
// this world's outgoing frames: a frame past its window waits there, not in
// the stream, so other lanes' frames and control frames pass it, until the
// peer returns credit in a control frame. Progress thread only.
#pragma once

#include <cstdint>

#include "base/layer.hpp"
#include "link/out_frame.hpp"
#include "tether/detail/core/send_windows.hpp"

TETHER_LAYER(6, "core");

namespace tether {

using detail::core::Lane;
using SendWindow = detail::core::SendWindow<link::OutFrame>;

// A world's windows: a held frame counts its payload's length.
struct SendWindows : detail::core::SendWindows<link::OutFrame> {
  SendWindows(int self, std::uint64_t p2pBytes)
      : detail::core::SendWindows<link::OutFrame>(self, p2pBytes,
                                                  [](const link::OutFrame& f) -> std::uint64_t { return f.len; }) {}
};

}  // namespace tether
