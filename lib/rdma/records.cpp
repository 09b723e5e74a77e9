// Encoding of QpRecord / MrRecord; the layout is documented in docs/rdma.md.
#include "tether/rdma/records.hpp"

#include <arpa/inet.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "base/bytes.hpp"

namespace tether::rdma {

// QpRecord byte offsets.
namespace qpo {
constexpr std::size_t magic = 0, version = 4, size = 6, srcRank = 8, dstRank = 12, qpn = 16, psn = 20, lid = 24,
                      port = 26, linkLayer = 27, activeMtu = 28, gidIndex = 29, maxRdAtomic = 30, maxDestRdAtomic = 31,
                      gid = 32, flags = 48, reserved = 49;
}  // namespace qpo

QpRecordBytes encode(const QpRecord& r) {
  QpRecordBytes b{};
  unsigned char* p = b.data();
  le::store<std::uint32_t>(p + qpo::magic, r.magic);
  le::store<std::uint16_t>(p + qpo::version, r.version);
  le::store<std::uint16_t>(p + qpo::size, r.size);
  le::store<std::uint32_t>(p + qpo::srcRank, r.srcRank);
  le::store<std::uint32_t>(p + qpo::dstRank, r.dstRank);
  le::store<std::uint32_t>(p + qpo::qpn, r.qpn);
  le::store<std::uint32_t>(p + qpo::psn, r.psn);
  le::store<std::uint16_t>(p + qpo::lid, r.lid);
  p[qpo::port] = r.port;
  p[qpo::linkLayer] = r.linkLayer;
  p[qpo::activeMtu] = r.activeMtu;
  p[qpo::gidIndex] = r.gidIndex;
  p[qpo::maxRdAtomic] = r.maxRdAtomic;
  p[qpo::maxDestRdAtomic] = r.maxDestRdAtomic;
  std::copy(r.gid.begin(), r.gid.end(), p + qpo::gid);  // network order, as ibv_gid.raw
  p[qpo::flags] = r.flags;
  std::copy(r.reserved.begin(), r.reserved.end(), p + qpo::reserved);
  return b;
}

QpRecord decodeQpRecord(const unsigned char* p) {
  QpRecord r;
  r.magic = le::load<std::uint32_t>(p + qpo::magic);
  r.version = le::load<std::uint16_t>(p + qpo::version);
  r.size = le::load<std::uint16_t>(p + qpo::size);
  r.srcRank = le::load<std::uint32_t>(p + qpo::srcRank);
  r.dstRank = le::load<std::uint32_t>(p + qpo::dstRank);
  r.qpn = le::load<std::uint32_t>(p + qpo::qpn);
  r.psn = le::load<std::uint32_t>(p + qpo::psn);
  r.lid = le::load<std::uint16_t>(p + qpo::lid);
  r.port = p[qpo::port];
  r.linkLayer = p[qpo::linkLayer];
  r.activeMtu = p[qpo::activeMtu];
  r.gidIndex = p[qpo::gidIndex];
  r.maxRdAtomic = p[qpo::maxRdAtomic];
  r.maxDestRdAtomic = p[qpo::maxDestRdAtomic];
  std::copy(p + qpo::gid, p + qpo::gid + 16, r.gid.begin());
  r.flags = p[qpo::flags];
  std::copy(p + qpo::reserved, p + QpRecord::kBytes, r.reserved.begin());
  return r;
}

namespace mro {
constexpr std::size_t magic = 0, version = 4, size = 6, rank = 8, rkey = 12, addr = 16, length = 24;
}  // namespace mro

MrRecordBytes encode(const MrRecord& r) {
  MrRecordBytes b{};
  unsigned char* p = b.data();
  le::store<std::uint32_t>(p + mro::magic, r.magic);
  le::store<std::uint16_t>(p + mro::version, r.version);
  le::store<std::uint16_t>(p + mro::size, r.size);
  le::store<std::uint32_t>(p + mro::rank, r.rank);
  le::store<std::uint32_t>(p + mro::rkey, r.rkey);
  le::store<std::uint64_t>(p + mro::addr, r.addr);
  le::store<std::uint64_t>(p + mro::length, r.length);
  return b;
}

MrRecord decodeMrRecord(const unsigned char* p) {
  MrRecord r;
  r.magic = le::load<std::uint32_t>(p + mro::magic);
  r.version = le::load<std::uint16_t>(p + mro::version);
  r.size = le::load<std::uint16_t>(p + mro::size);
  r.rank = le::load<std::uint32_t>(p + mro::rank);
  r.rkey = le::load<std::uint32_t>(p + mro::rkey);
  r.addr = le::load<std::uint64_t>(p + mro::addr);
  r.length = le::load<std::uint64_t>(p + mro::length);
  return r;
}

std::string formatGid(const std::array<std::uint8_t, 16>& gid) {
  char text[INET6_ADDRSTRLEN] = {};
  if (inet_ntop(AF_INET6, gid.data(), text, sizeof(text)) == nullptr) return "?";
  return text;
}

namespace {
const char* linkLayerName(std::uint8_t layer) {
  switch (layer) {
    case IBV_LINK_LAYER_INFINIBAND:
      return "IB";
    case IBV_LINK_LAYER_ETHERNET:
      return "ETH";
    default:
      return "unspecified";
  }
}
}  // namespace

std::string describe(const QpRecord& r) {
  const int mtuBytes = (r.activeMtu >= 1 && r.activeMtu <= 5) ? (128 << r.activeMtu) : 0;
  return fmt::format("TQPR v{} {}->{} qpn {:#x} psn {:#x} lid {} port {} {} mtu {} gid[{}] {}", r.version, r.srcRank,
                     r.dstRank, r.qpn, r.psn, r.lid, r.port, linkLayerName(r.linkLayer), mtuBytes, r.gidIndex,
                     formatGid(r.gid));
}

std::uint8_t negotiatePathMtu(const QpRecord& local, const QpRecord& remote) {
  return std::min(local.activeMtu, remote.activeMtu);
}

}  // namespace tether::rdma
