#include <algorithm>
#include <memory>
#include <vector>

#include "tether/bootstrap.hpp"
#include "tether/rdma/context.hpp"
#include "tether/rdma/mesh.hpp"

// connectMesh() and the MR exchange, step by step, for a runtime that keeps
// its own QPs. `context` is open (Context(verbs, Config::fromEnvironment(rank),
// rank, nranks - 1)) and `buffer` registered on it.
struct Connection {
  std::vector<std::unique_ptr<tether::rdma::QueuePair>> qps;  // qps[peer]; null at this rank
  std::vector<tether::rdma::MrRecord> regions;                 // regions[r]: rank r's buffer
};

inline Connection connectStepByStep(tether::Bootstrap& boot, tether::rdma::Context& context,
                                    const tether::rdma::MemoryRegion& buffer) {
  using namespace tether::rdma;
  const int n = boot.size(), me = boot.rank();
  Connection c;
  c.qps.resize(n);
  // 1. One RC QP per peer (in RESET); its record goes in block `peer`. Our
  //    own block is never read: a placeholder.
  std::vector<unsigned char> out(QpRecord::kBytes * n), in(QpRecord::kBytes * n);
  for (int peer = 0; peer < n; ++peer) {
    QpRecord record;
    record.srcRank = record.dstRank = me;
    record.flags = QpRecord::kNoQp;
    if (peer != me) {
      c.qps[peer] = std::make_unique<QueuePair>(context, peer);
      record = c.qps[peer]->localRecord();
    }
    const auto bytes = encode(record);
    std::copy(bytes.begin(), bytes.end(), out.begin() + QpRecord::kBytes * peer);
  }
  // 2. One all-to-all: block j of rank i is the record of rank i's QP for rank j.
  boot.alltoall(out.data(), in.data(), QpRecord::kBytes);
  // 3. Every record is validated before any of them reaches the hardware
  //    (Error{Protocol} naming the peer and the field).
  std::vector<QpRecord> remote(n);
  for (int peer = 0; peer < n; ++peer) {
    if (peer == me) continue;
    remote[peer] = decodeQpRecord(in.data() + QpRecord::kBytes * peer);
    validateRemote(remote[peer], c.qps[peer]->localRecord(), RecordOrigin{me, peer}, context.needsGrh());
  }
  // 4. RESET -> INIT -> RTR -> RTS.
  for (int peer = 0; peer < n; ++peer)
    if (peer != me) c.qps[peer]->connect(remote[peer]);
  // 5. The memory regions: an all-gather of MR records, each validated; the
  //    barrier means every rank's QPs are at RTS before anyone writes.
  c.regions = exchangeMemoryRegions(boot, buffer, buffer.length());
  boot.barrier();
  return c;
}
