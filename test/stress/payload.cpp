#include "payload.hpp"

#include <sstream>

namespace tether::stress {

namespace {

std::uint32_t fnv1a(const unsigned char* data, std::size_t bytes, std::uint32_t hash = 2166136261u) {
  for (std::size_t i = 0; i < bytes; ++i) {
    hash ^= data[i];
    hash *= 16777619u;
  }
  return hash;
}

std::uint32_t blockChecksum(const unsigned char* block, std::size_t bytes) {
  PayloadHeader header;
  std::memcpy(&header, block, sizeof header);
  header.checksum = 0;
  auto hash = fnv1a(reinterpret_cast<const unsigned char*>(&header), sizeof header);
  return fnv1a(block + sizeof header, bytes - sizeof header, hash);
}

std::uint64_t bodySeed(const OpKey& k) {
  std::uint64_t s = 0x9e3779b97f4a7c15ULL;
  for (std::uint64_t v : {std::uint64_t(k.comm), std::uint64_t(k.collective), std::uint64_t(k.kind),
                          std::uint64_t(k.step), std::uint64_t(std::uint32_t(k.source)),
                          std::uint64_t(std::uint32_t(k.destination)), std::uint64_t(k.sequence)}) {
    s = (s ^ v) * 0x100000001b3ULL;
    s ^= s >> 29;
  }
  return s;
}

OpKey keyOf(const PayloadHeader& h) {
  return OpKey{h.comm, h.collective, static_cast<OpKind>(h.kind), h.step, h.source, h.destination, h.sequence};
}

}  // namespace

const char* toString(OpKind kind) {
  switch (kind) {
    case OpKind::Allgather:
      return "allgather";
    case OpKind::Alltoall:
      return "alltoall";
    case OpKind::Alltoallv:
      return "alltoallv";
    case OpKind::Barrier:
      return "barrier";
    case OpKind::Broadcast:
      return "broadcast";
    case OpKind::SendRecv:
      return "send/recv";
  }
  return "unknown-op";
}

std::string describe(const OpKey& k) {
  std::ostringstream out;
  out << "comm " << k.comm << ' ' << toString(k.kind) << '#' << k.collective << " step " << k.step << " from "
      << k.source << " to " << k.destination << " seq " << k.sequence;
  return out.str();
}

void fillPayload(void* block, std::size_t bytes, const OpKey& key) {
  auto* out = static_cast<unsigned char*>(block);
  PayloadHeader h{kPayloadMagic, key.comm,        key.collective, static_cast<std::uint32_t>(key.kind), key.step,
                  key.source,    key.destination, key.sequence,   static_cast<std::uint32_t>(bytes),    0};
  std::memcpy(out, &h, sizeof h);
  std::uint64_t x = bodySeed(key);
  for (std::size_t i = sizeof h; i < bytes; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    out[i] = static_cast<unsigned char>(x);
  }
  h.checksum = blockChecksum(out, bytes);
  std::memcpy(out, &h, sizeof h);
}

std::optional<std::string> checkPayload(const void* block, std::size_t bytes, const OpKey& expected) {
  const auto* in = static_cast<const unsigned char*>(block);
  const std::string want = "expected " + describe(expected);
  if (bytes < sizeof(PayloadHeader)) return want + ": block of " + std::to_string(bytes) + " bytes is too short";
  PayloadHeader h;
  std::memcpy(&h, in, sizeof h);
  if (h.magic != kPayloadMagic) return want + ": no payload header (bad magic)";
  if (h.length != bytes) {
    return want + ", got " + describe(keyOf(h)) + " of " + std::to_string(h.length) + " bytes in a " +
           std::to_string(bytes) + "-byte block (truncated or misplaced)";
  }
  if (blockChecksum(in, bytes) != h.checksum) return want + ": checksum mismatch (corrupted)";
  if (!(keyOf(h) == expected)) return want + ", got " + describe(keyOf(h)) + " (swapped)";
  return std::nullopt;
}

}  // namespace tether::stress
