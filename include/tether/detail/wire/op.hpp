// tether/detail/wire/op.hpp — the collective operations and their names.
// Header-only, C++17. The wire layer's: the values are operation codes in
// collective frames (lib/wire/frame.hpp), so it sits below the plans that use
// it (test/unit/layers_check.py); the namespace stays detail::coll, where the
// collectives name it. Also the words both worlds describe calls and frames
// with (lib/wire/frame.cpp, tether/testing/detail/message.hpp).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace tether {
namespace detail {
namespace coll {

// Collective operations. The values are the wire's operation codes (carried in
// the tag field of collective frames, docs/wire-protocol.md).
enum class Op : std::uint32_t {
  Allgather = 1,
  Alltoall = 2,
  Alltoallv = 3,
  Broadcast = 4,
  Barrier = 5,
  SubsetBarrier = 6,
  Split = 7,
};

inline const char* opName(Op op) {
  switch (op) {
    case Op::Allgather:
      return "allgather";
    case Op::Alltoall:
      return "alltoall";
    case Op::Alltoallv:
      return "alltoallv";
    case Op::Broadcast:
      return "broadcast";
    case Op::Barrier:
      return "barrier";
    case Op::SubsetBarrier:
      return "subset-barrier";
    case Op::Split:
      return "split";
  }
  return "unknown-op";
}

// A collective call: "allgather#2".
template <class Id>
std::string callName(const std::string& op, Id id) {
  return op + "#" + std::to_string(id);
}

// A call on communicator `comm`: one other than the world's is named by its
// id, "barrier#3 (comm 5d2e9a01c0ffee00)"; the world's (`comm` 0) is not.
template <class Id>
std::string callName(const std::string& op, Id id, std::uint64_t comm) {
  if (comm == 0) return callName(op, id);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(comm));
  return callName(op, id) + " (comm " + hex + ")";
}

// A frame of one step of a call: "allgather#2 step 0 (64 bytes)".
template <class Step, class Bytes>
std::string stepFrame(const std::string& call, Step step, Bytes bytes) {
  return call + " step " + std::to_string(step) + " (" + std::to_string(bytes) + " bytes)";
}

// A point-to-point frame: "send tag 7 (64 bytes)".
template <class Tag, class Bytes>
std::string sendTagFrame(Tag tag, Bytes bytes) {
  return "send tag " + std::to_string(tag) + " (" + std::to_string(bytes) + " bytes)";
}

}  // namespace coll
}  // namespace detail
}  // namespace tether
