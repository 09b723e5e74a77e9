// Validation of remote records: every check names the peer, the field and the
// value, so a zeroed or swapped payload reads as what it is.
#include <infiniband/verbs.h>

#include <algorithm>

#include <fmt/format.h>

#include "tether/error.hpp"
#include "tether/rdma/records.hpp"

namespace tether::rdma {
namespace {

constexpr std::uint32_t kMax24 = (1u << 24) - 1;

[[noreturn]] void reject(const RecordOrigin& origin, const char* record, const char* field, const std::string& value,
                         const char* want) {
  throw Error(ErrorCode::Protocol,
              fmt::format("rank {}: {}: {} record from peer {} has {} = {} ({})", origin.rank, origin.operation, record,
                          origin.peer, field, value, want),
              origin.rank, origin.peer);
}

std::string hex(std::uint64_t v) { return fmt::format("{:#x}", v); }

bool allZero(const std::uint8_t* p, std::size_t n) {
  return std::all_of(p, p + n, [](std::uint8_t b) { return b == 0; });
}

// Fields every QP record carries, placeholder or not.
void checkFraming(const QpRecord& r, const RecordOrigin& o) {
  if (r.magic != QpRecord::kMagic)
    reject(o, "QP", "magic", hex(r.magic),
           fmt::format("want {}; zeroed or not a QP record", hex(QpRecord::kMagic)).c_str());
  if (r.version != QpRecord::kVersion)
    reject(o, "QP", "version", std::to_string(r.version),
           fmt::format("this build knows version {}", QpRecord::kVersion).c_str());
  if (r.size != QpRecord::kBytes)
    reject(o, "QP", "size", std::to_string(r.size), fmt::format("want {}", QpRecord::kBytes).c_str());
  if (!allZero(r.reserved.data(), r.reserved.size()))
    reject(o, "QP", "reserved", "non-zero bytes", "must be zero in version 1");
  if (static_cast<std::int64_t>(r.srcRank) != o.peer)
    reject(o, "QP", "srcRank", std::to_string(r.srcRank),
           fmt::format("want {}: the record is another rank's", o.peer).c_str());
  if (static_cast<std::int64_t>(r.dstRank) != o.rank)
    reject(o, "QP", "dstRank", std::to_string(r.dstRank),
           fmt::format("want {}: the record was meant for another rank", o.rank).c_str());
}

}  // namespace

void validatePlaceholder(const QpRecord& r, const RecordOrigin& o) {
  checkFraming(r, o);
  if ((r.flags & QpRecord::kNoQp) == 0)
    reject(o, "QP", "flags", hex(r.flags),
           "want the no-QP placeholder flag: this peer has a QP but this rank has no devices");
}

void validateRemote(const QpRecord& r, const QpRecord& local, const RecordOrigin& o, bool localNeedsGrh) {
  checkFraming(r, o);
  if (r.flags & QpRecord::kNoQp)
    reject(o, "QP", "flags", hex(r.flags), "the peer has no RDMA device, so no QP to connect");
  if (r.flags != 0) reject(o, "QP", "flags", hex(r.flags), "unknown flag bits");
  if (r.qpn == 0 || r.qpn > kMax24) reject(o, "QP", "qpn", hex(r.qpn), "want 1..0xffffff");
  if (r.psn > kMax24) reject(o, "QP", "psn", hex(r.psn), "want < 2^24");
  if (r.port == 0) reject(o, "QP", "port", "0", "port numbers start at 1");
  if (r.linkLayer != IBV_LINK_LAYER_INFINIBAND && r.linkLayer != IBV_LINK_LAYER_ETHERNET)
    reject(o, "QP", "linkLayer", std::to_string(r.linkLayer), "want 1 (InfiniBand) or 2 (Ethernet)");
  if (r.linkLayer != local.linkLayer)
    reject(o, "QP", "linkLayer", std::to_string(r.linkLayer),
           fmt::format("ours is {}: InfiniBand and RoCE ports cannot connect", local.linkLayer).c_str());
  if (r.activeMtu < IBV_MTU_256 || r.activeMtu > IBV_MTU_4096)
    reject(o, "QP", "activeMtu", std::to_string(r.activeMtu), "want 1 (256) .. 5 (4096)");
  const bool zeroGid = allZero(r.gid.data(), r.gid.size());
  if (r.linkLayer == IBV_LINK_LAYER_INFINIBAND && r.lid == 0)
    reject(o, "QP", "lid", "0", "InfiniBand needs the peer's LID");
  if (r.linkLayer == IBV_LINK_LAYER_ETHERNET && zeroGid)
    reject(o, "QP", "gid", formatGid(r.gid), "RoCE addresses the peer by GID; zero is no address");
  if (localNeedsGrh && zeroGid)
    reject(o, "QP", "gid", formatGid(r.gid), "this port requires a GRH, which needs the peer's GID");
  if (r.maxRdAtomic > 16 || r.maxDestRdAtomic > 16)
    reject(o, "QP", r.maxRdAtomic > 16 ? "maxRdAtomic" : "maxDestRdAtomic",
           std::to_string(std::max(r.maxRdAtomic, r.maxDestRdAtomic)), "want 0..16");
}

void validateRemote(const MrRecord& r, std::size_t minLength, const RecordOrigin& o) {
  if (r.magic != MrRecord::kMagic)
    reject(o, "MR", "magic", hex(r.magic),
           fmt::format("want {}; zeroed or not an MR record", hex(MrRecord::kMagic)).c_str());
  if (r.version != MrRecord::kVersion)
    reject(o, "MR", "version", std::to_string(r.version),
           fmt::format("this build knows version {}", MrRecord::kVersion).c_str());
  if (r.size != MrRecord::kBytes)
    reject(o, "MR", "size", std::to_string(r.size), fmt::format("want {}", MrRecord::kBytes).c_str());
  if (static_cast<std::int64_t>(r.rank) != o.peer)
    reject(o, "MR", "rank", std::to_string(r.rank), fmt::format("want {}", o.peer).c_str());
  if (r.addr == 0) reject(o, "MR", "addr", "0", "a registered region has an address");
  if (r.length < minLength)
    reject(o, "MR", "length", std::to_string(r.length), fmt::format("want at least {}", minLength).c_str());
}

}  // namespace tether::rdma
