// The host-local rendezvous' table as it goes down the tree of host leaders
// (rendezvous/host_local.cpp): a Table frame from a leader's parent carries
// the tree (its radix and the leaders, ascending: tree position i + 1 is
// leaders[i], the root is position 0) and the address table, so a leader
// finds its parent and children in what it receives. Byte layout:
// docs/wire-protocol.md ("Table" and "TableAck").
#pragma once

#include <cstdint>
#include <vector>

#include "base/layer.hpp"
#include "wire/handshake.hpp"

TETHER_LAYER(1, "wire");

namespace tether::wire {

struct LeaderTable {
  std::uint32_t radix = 0;
  std::vector<std::uint32_t> leaders;  // ascending, rank 0 not among them
  SharedBytes table;                   // the plain Table payload (AddressTable's encoding)
};

// u32 radix, u32 count, `count` leader ranks (u32 each), then the table's bytes.
Bytes encodeLeaderTable(std::uint32_t radix, const std::vector<std::uint32_t>& leaders, const Bytes& table);
// Checks the radix (at least 2), that the leaders are ascending, distinct and
// in 1 .. nranks - 1, and the table (an AddressTable of `nranks`); throws
// std::invalid_argument or std::out_of_range saying what is wrong.
LeaderTable decodeLeaderTable(const Bytes& b, std::uint32_t nranks);

}  // namespace tether::wire
