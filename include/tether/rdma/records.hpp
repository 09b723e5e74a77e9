// tether/rdma/records.hpp — what ranks exchange to connect RC queue pairs.
//
// Both records have a fixed little-endian layout (docs/rdma.md) and are
// encoded and decoded field by field, never by copying a struct. Decoding
// only parses; validate*() decides whether a remote record may be used and
// throws tether::Error{Protocol} naming rank, peer, field and value — so a
// zeroed or swapped payload is caught before any ibv_modify_qp call.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace tether::rdma {

struct QpRecord {
  static constexpr std::uint32_t kMagic = 0x52505154;  // "TQPR" in little-endian bytes
  static constexpr std::uint16_t kVersion = 1;
  static constexpr std::size_t kBytes = 64;
  // flags
  static constexpr std::uint8_t kNoQp = 0x01;  // placeholder: the sender has no QP (no devices)

  std::uint32_t magic = kMagic;
  std::uint16_t version = kVersion;
  std::uint16_t size = kBytes;
  std::uint32_t srcRank = 0;  // the rank that made the record
  std::uint32_t dstRank = 0;  // the rank it is meant for
  std::uint32_t qpn = 0;      // 24 bits
  std::uint32_t psn = 0;      // 24 bits: the sender's SQ PSN = the receiver's RQ PSN
  std::uint16_t lid = 0;
  std::uint8_t port = 0;
  std::uint8_t linkLayer = 0;        // IBV_LINK_LAYER_*
  std::uint8_t activeMtu = 0;        // enum ibv_mtu (1 = 256 .. 5 = 4096)
  std::uint8_t gidIndex = 0;         // the sender's own source GID index (informational)
  std::uint8_t maxRdAtomic = 0;      // RDMA reads/atomics the sender issues at once
  std::uint8_t maxDestRdAtomic = 0;  // RDMA reads/atomics the sender accepts at once
  std::array<std::uint8_t, 16> gid{};
  std::uint8_t flags = 0;
  std::array<std::uint8_t, 15> reserved{};
};

struct MrRecord {
  static constexpr std::uint32_t kMagic = 0x52524D54;  // "TMRR"
  static constexpr std::uint16_t kVersion = 1;
  static constexpr std::size_t kBytes = 32;

  std::uint32_t magic = kMagic;
  std::uint16_t version = kVersion;
  std::uint16_t size = kBytes;
  std::uint32_t rank = 0;
  std::uint32_t rkey = 0;
  std::uint64_t addr = 0;
  std::uint64_t length = 0;
};

using QpRecordBytes = std::array<unsigned char, QpRecord::kBytes>;
using MrRecordBytes = std::array<unsigned char, MrRecord::kBytes>;

QpRecordBytes encode(const QpRecord& record);
MrRecordBytes encode(const MrRecord& record);
// Parse exactly kBytes; no validation of the values.
QpRecord decodeQpRecord(const unsigned char* bytes);
MrRecord decodeMrRecord(const unsigned char* bytes);

// Where a record came from, for messages.
struct RecordOrigin {
  int rank = -1;  // this rank
  int peer = -1;  // the rank whose record it is
  const char* operation = "rdma qp-exchange";
};

// Checks a peer's QP record against ours before any of it reaches the
// hardware: magic, version, size, reserved bytes, srcRank == peer,
// dstRank == rank, QPN in 1..2^24-1, PSN < 2^24, link layers agree, a known
// MTU, LID != 0 on InfiniBand, a non-zero GID on RoCE or when either side
// needs a GRH. Throws Error{Protocol}.
void validateRemote(const QpRecord& remote, const QpRecord& local, const RecordOrigin& origin,
                    bool localNeedsGrh = false);
// Placeholder records (kNoQp) from ranks without devices: framing and ranks only.
void validatePlaceholder(const QpRecord& remote, const RecordOrigin& origin);
// An MR record from `peer`: framing, rank, non-zero address and length >= minLength.
void validateRemote(const MrRecord& remote, std::size_t minLength, const RecordOrigin& origin);

// Path MTU for the connection: the smaller of both active MTUs (enum ibv_mtu values).
std::uint8_t negotiatePathMtu(const QpRecord& local, const QpRecord& remote);

// "TQPR v1 0->3 qpn 0x1c2 psn 0x51f00 lid 0 port 1 ETH mtu 1024 gid ::ffff:10.0.0.1".
std::string describe(const QpRecord& record);
std::string formatGid(const std::array<std::uint8_t, 16>& gid);

}  // namespace tether::rdma
