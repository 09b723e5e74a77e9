// libFuzzer target: the RDMA records a peer sends to bring up queue pairs
// (QpRecord, MrRecord). Decoding must round-trip byte for byte; validation
// must either accept or throw Error{Protocol} — and what it accepts must obey
// the rules that keep a zeroed or swapped record away from ibv_modify_qp.
#include <infiniband/verbs.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "tether/error.hpp"
#include "tether/rdma/records.hpp"

using namespace tether;
using namespace tether::rdma;

namespace {

// This rank (3) expects records from rank 5.
QpRecord localRecord(std::uint8_t linkLayer) {
  QpRecord l;
  l.srcRank = 3;
  l.dstRank = 5;
  l.qpn = 0x1c2;
  l.psn = 0x51f00;
  l.lid = linkLayer == IBV_LINK_LAYER_INFINIBAND ? 7 : 0;
  l.port = 1;
  l.linkLayer = linkLayer;
  l.activeMtu = IBV_MTU_1024;
  l.gid[15] = 1;
  return l;
}

template <class F>
void expectProtocolOrNothing(F f) {
  try {
    f();
  } catch (const Error& e) {
    if (e.code() != ErrorCode::Protocol) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::uint8_t mode = data[0];
  ++data;
  --size;
  RecordOrigin origin{3, 5};
  if (size >= QpRecord::kBytes) {
    QpRecord r = decodeQpRecord(data);
    auto again = encode(r);
    if (std::memcmp(again.data(), data, QpRecord::kBytes) != 0) std::abort();
    (void)describe(r);
    for (std::uint8_t layer : {std::uint8_t(IBV_LINK_LAYER_ETHERNET), std::uint8_t(IBV_LINK_LAYER_INFINIBAND)}) {
      QpRecord local = localRecord(layer);
      bool accepted = false;
      expectProtocolOrNothing([&] {
        validateRemote(r, local, origin, (mode & 1) != 0);
        accepted = true;
      });
      if (accepted) {
        // Never a zeroed or misaddressed record.
        if (r.magic != QpRecord::kMagic || r.srcRank != 5 || r.dstRank != 3) std::abort();
        if (r.qpn == 0 || r.qpn >= (1u << 24) || r.psn >= (1u << 24)) std::abort();
        auto mtu = negotiatePathMtu(local, r);
        if (mtu < IBV_MTU_256 || mtu > IBV_MTU_4096) std::abort();
      }
    }
    expectProtocolOrNothing([&] { validatePlaceholder(r, origin); });
  }
  if (size >= MrRecord::kBytes) {
    MrRecord m = decodeMrRecord(data);
    auto again = encode(m);
    if (std::memcmp(again.data(), data, MrRecord::kBytes) != 0) std::abort();
    bool accepted = false;
    expectProtocolOrNothing([&] {
      validateRemote(m, 4096, origin);
      accepted = true;
    });
    if (accepted && (m.addr == 0 || m.length < 4096)) std::abort();
  }
  return 0;
}
