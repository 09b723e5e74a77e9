// tether/rdma/gid.hpp — which source GID a QP uses.
//
// InfiniBand ports use GID index 0 (the port GID). Ethernet (RoCE) ports need
// a GID whose type and address family the switches route: the choice prefers a
// RoCE v2 entry of the wanted family (IPv4-mapped for AF_INET), then RoCE v2 of
// the other family, then RoCE v1; within IPv6 a global address beats a
// link-local one. TETHER_IB_GID_INDEX overrides the choice (it must name a
// valid entry of the port).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tether/rdma/verbs.hpp"

namespace tether::rdma {

struct GidChoice {
  int index = -1;
  ibv_gid gid{};
  std::uint32_t type = IBV_GID_TYPE_IB;
  std::string reason;  // why this entry, for the log
};

// The valid GID entries of one port: ibv_query_gid_table, falling back to
// ibv_query_gid_ex per index when the table call is not supported.
// Throws Error{System} when the port's table cannot be read.
std::vector<ibv_gid_entry> readGidTable(Verbs& verbs, ibv_context* context, std::uint8_t port,
                                        const ibv_port_attr& portAttr, const std::string& where);

// Pure choice over the entries of one port. overrideIndex < 0: choose.
// Throws Error{InvalidArgument} for an override that names no valid entry and
// Error{System} when no entry fits the link layer.
GidChoice chooseGid(const std::vector<ibv_gid_entry>& entries, std::uint8_t linkLayer, int addressFamily,
                    int overrideIndex, const std::string& where);

bool isIpv4MappedGid(const ibv_gid& gid);
bool isZeroGid(const ibv_gid& gid);

}  // namespace tether::rdma
