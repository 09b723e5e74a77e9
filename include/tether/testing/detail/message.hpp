// tether/testing/detail/message.hpp — what an in-process message is, and the
// in-process instance of the shared call table.
//
// An in-process message is a frame of the wire: the TCP world's header
// (tether/detail/wire/frame.hpp), naming the operation that produced it
// (communicator, collective id, step, operation and root, or tag), from its
// sender's world rank; receivers match on the full key
// (tether/detail/match/key.hpp), so a payload can never land in the wrong
// operation. How frames are built, matched, stashed and described, posting,
// settling and failing (tether/detail/core/call_table.hpp) and the
// collective sequence checks (sequence_guard.hpp) are the TCP world's code
// (tether/detail/core/frame_calls.hpp). Header-only, C++17.
#pragma once

#include <cstdint>
#include <string>

#include "tether/detail/core/call_table.hpp"
#include "tether/detail/core/frame_calls.hpp"
#include "tether/detail/core/rank_names.hpp"
#include "tether/detail/core/sequence_guard.hpp"

namespace tether {
namespace testing {
namespace detail {

namespace wire = ::tether::detail::wire;
using Key = ::tether::detail::match::Key;
using Header = wire::FrameHeader;

// A call in flight on one rank (a receive, a collective): what the call
// table and the sequence guard keep, and how its errors name it.
struct Call : ::tether::detail::core::CallState<Key> {
  // How its errors name ranks (its endpoint's): this one "rank 1" or "rank 1 (world 3)".
  const ::tether::detail::core::RankNames* names = nullptr;
  std::string where;  // "recv from rank 0 tag 3", "allgather#2"
  const std::string& name() const { return where; }
  // A collective's: its communicator, id, wire operation code and root (as
  // its frames carry them) and its communicator's sequence (null otherwise).
  std::uint64_t comm = 0, coll = 0;
  std::uint32_t code = 0, root = wire::kNoRoot;
  ::tether::detail::core::Sequence<Call>* seq = nullptr;
};

using InProcessCalls = ::tether::detail::core::FrameCalls<Call, ::tether::detail::core::Sequence<Call>>;
using CallTable = ::tether::detail::core::CallTable<InProcessCalls>;
using SequenceGuard = ::tether::detail::core::SequenceGuard<InProcessCalls>;

}  // namespace detail
}  // namespace testing
}  // namespace tether
