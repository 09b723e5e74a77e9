// qp_records.hpp — 64-byte self-describing records shaped like the queue-pair
// information runtimes exchange in an all-to-all: each names its source,
// destination and iteration and carries a checksum, so a record delivered to
// the wrong rank, the wrong step or the wrong slot is counted, never missed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace tether::test {

struct QpRecord {
  std::uint32_t src;
  std::uint32_t dst;
  std::uint64_t iteration;
  std::uint32_t qpn;
  std::uint32_t psn;
  std::uint16_t lid;
  std::uint8_t port;
  std::uint8_t linkLayer;
  std::uint32_t mtu;
  unsigned char gid[16];
  unsigned char reserved[8];
  std::uint64_t checksum;  // FNV-1a over everything before it
};
static_assert(sizeof(QpRecord) == 64, "a QP-like record is 64 bytes");

inline std::uint64_t fnv1a(const void* data, std::size_t n) {
  auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t h = 1469598103934665603ull;
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

inline QpRecord makeRecord(std::uint32_t src, std::uint32_t dst, std::uint64_t iteration) {
  QpRecord r{};
  r.src = src;
  r.dst = dst;
  r.iteration = iteration;
  std::uint64_t mix = fnv1a(&r, 16);
  r.qpn = static_cast<std::uint32_t>(mix & 0xffffff);
  r.psn = static_cast<std::uint32_t>((mix >> 24) & 0xffffff);
  r.lid = static_cast<std::uint16_t>(src + 1);
  r.port = 1;
  r.linkLayer = 2;
  r.mtu = 4096;
  for (int i = 0; i < 16; ++i) r.gid[i] = static_cast<unsigned char>(mix >> (i % 8 * 8));
  r.checksum = fnv1a(&r, offsetof(QpRecord, checksum));
  return r;
}

// "" when `got` is exactly the record src sent to dst at `iteration`, else why not.
inline std::string checkRecord(const QpRecord& got, std::uint32_t src, std::uint32_t dst, std::uint64_t iteration) {
  QpRecord want = makeRecord(src, dst, iteration);
  if (std::memcmp(&got, &want, sizeof got) == 0) return "";
  return "iteration " + std::to_string(iteration) + ": slot of rank " + std::to_string(src) + " holds src " +
         std::to_string(got.src) + " dst " + std::to_string(got.dst) + " iteration " + std::to_string(got.iteration) +
         (got.checksum == fnv1a(&got, offsetof(QpRecord, checksum)) ? "" : " (bad checksum)");
}

}  // namespace tether::test
