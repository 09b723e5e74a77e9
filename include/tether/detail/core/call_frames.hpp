// tether/detail/core/call_frames.hpp — a collective call's checks of the
// frames waiting in its rank's mailbox, the same in every world (lib/core's
// SequenceGuard and the in-process testing world):
//  * foreignFrame: a frame at the call's id that names another operation (or
//    another root): the ranks called different collectives (checked when the
//    call starts and while it waits);
//  * leftoverFrame: a frame still waiting at the call's id once the call
//    returned: its sender ran another algorithm or operation.
// Each reports the frame from the lowest source, so every world names the same
// peer. Generic over the world's mailbox (tether/detail/match/mailbox.hpp),
// key and frame. Header-only, C++17.
#pragma once

#include <climits>
#include <string>
#include <utility>

#include "tether/detail/core/failures.hpp"

namespace tether {
namespace detail {
namespace core {

// What a check found: the frame's sender (as the world's errors name it) and
// the error's text; nothing while the text is empty.
struct FrameFault {
  int source = -1;
  std::string what;
  explicit operator bool() const { return !what.empty(); }
};

// The frame in `box` from the lowest source among those of the call
// (`ofCall(key)`) for which `fault(source, frame)` gives a text.
// `source(key)`: the frame's sender as errors name it.
template <class Frame, class Mailbox, class OfCall, class Source, class Fault>
FrameFault lowestFault(const Mailbox& box, OfCall ofCall, Source source, Fault fault) {
  FrameFault found;
  int lowest = INT_MAX;
  box.forEachStashed([&](const auto& key, const Frame& frame) {
    if (!ofCall(key)) return;
    const int src = source(key);
    if (src >= lowest) return;
    std::string what = fault(src, frame);
    if (what.empty()) return;
    lowest = src;
    found = FrameFault{src, std::move(what)};
  });
  return found;
}

// A frame of the call whose stamp is not this rank's: `mismatch(source,
// frame)` gives the text (failures::differentCollectives, differentRoots),
// empty when it agrees.
template <class Frame, class Mailbox, class OfCall, class Source, class Mismatch>
FrameFault foreignFrame(const Mailbox& box, OfCall ofCall, Source source, Mismatch mismatch) {
  return lowestFault<Frame>(box, ofCall, source, mismatch);
}

// After the call `call` ("allgather#2") returned: a frame still waiting at its id.
template <class Frame, class Mailbox, class OfCall, class Source, class Describe>
FrameFault leftoverFrame(const Mailbox& box, OfCall ofCall, Source source, Describe describe, const std::string& call) {
  return lowestFault<Frame>(box, ofCall, source, [&](int src, const Frame& frame) {
    return failures::neverReceives(src, describe(frame), call);
  });
}

}  // namespace core
}  // namespace detail
}  // namespace tether
