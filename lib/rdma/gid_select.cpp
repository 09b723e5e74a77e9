// Reading a port's GID table and choosing the source GID (see tether/rdma/gid.hpp).
#include <arpa/inet.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "tether/error.hpp"
#include "tether/rdma/gid.hpp"
#include "tether/rdma/records.hpp"

namespace tether::rdma {
namespace {

std::array<std::uint8_t, 16> rawOf(const ibv_gid& gid) {
  std::array<std::uint8_t, 16> raw{};
  std::memcpy(raw.data(), gid.raw, 16);
  return raw;
}

bool isLinkLocal(const ibv_gid& gid) { return gid.raw[0] == 0xfe && (gid.raw[1] & 0xc0) == 0x80; }

const char* typeName(std::uint32_t type) {
  switch (type) {
    case IBV_GID_TYPE_IB:
      return "IB";
    case IBV_GID_TYPE_ROCE_V1:
      return "RoCE v1";
    case IBV_GID_TYPE_ROCE_V2:
      return "RoCE v2";
    default:
      return "unknown type";
  }
}

}  // namespace

bool isZeroGid(const ibv_gid& gid) {
  return std::all_of(gid.raw, gid.raw + 16, [](std::uint8_t b) { return b == 0; });
}

bool isIpv4MappedGid(const ibv_gid& gid) {
  static constexpr std::uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(gid.raw, prefix, sizeof(prefix)) == 0;
}

std::vector<ibv_gid_entry> readGidTable(Verbs& verbs, ibv_context* context, std::uint8_t port,
                                        const ibv_port_attr& portAttr, const std::string& where) {
  std::vector<ibv_gid_entry> entries;
  ibv_device_attr deviceAttr{};
  int ports = 1;
  if (verbs.queryDevice(context, &deviceAttr) == 0) ports = std::max<int>(1, deviceAttr.phys_port_cnt);
  std::vector<ibv_gid_entry> all(static_cast<std::size_t>(std::max(1, portAttr.gid_tbl_len)) *
                                 static_cast<std::size_t>(ports));
  const long count = verbs.queryGidTable(context, all.data(), all.size());
  if (count >= 0) {
    for (long i = 0; i < count; ++i)
      if (all[i].port_num == port) entries.push_back(all[i]);
    return entries;
  }
  if (-count != EOPNOTSUPP && -count != ENOSYS && -count != EINVAL)
    throw Error(ErrorCode::System, fmt::format("rdma: ibv_query_gid_table on {} failed: {} (errno {})", where,
                                               std::strerror(static_cast<int>(-count)), -count));
  // Older kernels: read entry by entry; ENODATA marks an empty slot.
  for (int index = 0; index < portAttr.gid_tbl_len; ++index) {
    ibv_gid_entry entry{};
    const int rc = verbs.queryGidEx(context, port, static_cast<std::uint32_t>(index), &entry);
    if (rc == ENODATA) continue;
    if (rc != 0)
      throw Error(ErrorCode::System, fmt::format("rdma: ibv_query_gid_ex({} index {}) failed: {} (errno {})", where,
                                                 index, std::strerror(rc), rc));
    entries.push_back(entry);
  }
  return entries;
}

GidChoice chooseGid(const std::vector<ibv_gid_entry>& entries, std::uint8_t linkLayer, int addressFamily,
                    int overrideIndex, const std::string& where) {
  auto make = [](const ibv_gid_entry& e, std::string reason) {
    GidChoice c;
    c.index = static_cast<int>(e.gid_index);
    c.gid = e.gid;
    c.type = e.gid_type;
    c.reason = fmt::format("{} {} ({})", typeName(e.gid_type), formatGid(rawOf(e.gid)), reason);
    return c;
  };
  if (overrideIndex >= 0) {
    for (const auto& e : entries)
      if (static_cast<int>(e.gid_index) == overrideIndex && !isZeroGid(e.gid)) return make(e, "TETHER_IB_GID_INDEX");
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("rdma config: TETHER_IB_GID_INDEX={} names no valid GID entry on {} "
                            "({} valid entries)",
                            overrideIndex, where, entries.size()));
  }
  if (linkLayer != IBV_LINK_LAYER_ETHERNET) {
    // InfiniBand: the port GID at index 0 (used only when a GRH is needed).
    for (const auto& e : entries)
      if (e.gid_index == 0) return make(e, "InfiniBand port GID");
    GidChoice none;
    none.index = 0;
    none.reason = "InfiniBand, no GID entry 0 (LID routing only)";
    return none;
  }
  // RoCE: rank each entry; lower is better.
  auto score = [&](const ibv_gid_entry& e) -> std::optional<int> {
    if (isZeroGid(e.gid)) return std::nullopt;
    const bool v4 = isIpv4MappedGid(e.gid);
    const bool wantedFamily = (addressFamily == AF_INET) == v4;
    const int familyRank = wantedFamily ? 0 : 1;
    const int scopeRank = (!v4 && isLinkLocal(e.gid)) ? 1 : 0;
    if (e.gid_type == IBV_GID_TYPE_ROCE_V2) return familyRank * 2 + scopeRank;
    if (e.gid_type == IBV_GID_TYPE_ROCE_V1) return 10 + familyRank * 2 + scopeRank;
    return std::nullopt;
  };
  const ibv_gid_entry* best = nullptr;
  int bestScore = 0;
  for (const auto& e : entries) {
    const auto s = score(e);
    if (s && (best == nullptr || *s < bestScore)) {
      best = &e;
      bestScore = *s;
    }
  }
  if (best == nullptr)
    throw Error(ErrorCode::System, fmt::format("rdma: no usable RoCE GID on {} ({} entries; is an IP address "
                                               "configured on the port's netdev?)",
                                               where, entries.size()));
  const bool wantedFamily = (bestScore % 10) < 2;
  return make(*best, wantedFamily ? fmt::format("preferred {}", addressFamily == AF_INET6 ? "AF_INET6" : "AF_INET")
                                  : "no entry of the wanted address family");
}

}  // namespace tether::rdma
