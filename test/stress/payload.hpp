// payload.hpp — self-describing payloads: every block a test sends says which
// operation it belongs to (communicator, collective id, kind, step, source,
// destination, sequence) and carries a checksum over everything else, so a
// receiver can tell a swapped, truncated, duplicated or corrupted block from
// the right one and name both operations. Used by the control test and the
// stress harness alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

namespace tether::stress {

enum class OpKind : std::uint32_t {
  Allgather = 1,
  Alltoall,
  Alltoallv,
  Barrier,
  Broadcast,
  SendRecv,
};

const char* toString(OpKind kind);

// What a block should be; also what it is, once decoded.
struct OpKey {
  std::uint32_t comm = 0;        // communicator number in the test's program
  std::uint32_t collective = 0;  // operation number on that communicator (or p2p message number)
  OpKind kind = OpKind::SendRecv;
  std::uint32_t step = 0;
  std::int32_t source = -1;
  std::int32_t destination = -1;
  std::uint32_t sequence = 0;  // e.g. n-th message with this (peer, tag); 0 for collectives
  bool operator==(const OpKey&) const = default;
};

std::string describe(const OpKey& key);

struct PayloadHeader {
  std::uint32_t magic;
  std::uint32_t comm;
  std::uint32_t collective;
  std::uint32_t kind;
  std::uint32_t step;
  std::int32_t source;
  std::int32_t destination;
  std::uint32_t sequence;
  std::uint32_t length;    // whole block, header included
  std::uint32_t checksum;  // FNV-1a over the block with this field zero
};

inline constexpr std::uint32_t kPayloadMagic = 0x54455448;  // "TETH"
inline constexpr std::size_t kMinPayload = sizeof(PayloadHeader);

// Writes a block of `bytes` (>= kMinPayload) describing `key`; the body is a
// pseudo-random pattern derived from the key, so bodies differ between operations.
void fillPayload(void* block, std::size_t bytes, const OpKey& key);

// Empty when the block is exactly what fillPayload(block, bytes, expected)
// wrote; otherwise a sentence naming the expected and the received operation
// (or what is broken: magic, length, checksum).
std::optional<std::string> checkPayload(const void* block, std::size_t bytes, const OpKey& expected);

}  // namespace tether::stress
