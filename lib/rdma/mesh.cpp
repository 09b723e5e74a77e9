// The all-to-all QP exchange and the MR all-gather over a Bootstrap.
#include "tether/rdma/mesh.hpp"

#include <algorithm>

namespace tether::rdma {

int Mesh::connected() const {
  return static_cast<int>(std::count_if(qps.begin(), qps.end(),
                                        [](const auto& qp) { return qp != nullptr && qp->state() == IBV_QPS_RTS; }));
}

Mesh connectMesh(Bootstrap& boot, Context& context, const std::function<void(const char* phase)>& phaseDone) {
  auto done = [&](const char* phase) {
    if (phaseDone) phaseDone(phase);
  };
  const int n = boot.size();
  const int me = boot.rank();
  Mesh mesh;
  mesh.qps.resize(static_cast<std::size_t>(n));
  std::vector<unsigned char> out(QpRecord::kBytes * n), in(QpRecord::kBytes * n);
  for (int peer = 0; peer < n; ++peer) {
    QpRecord record;
    if (peer == me) {  // our own block is never read; keep it a well-formed placeholder
      record.srcRank = record.dstRank = static_cast<std::uint32_t>(me);
      record.flags = QpRecord::kNoQp;
    } else {
      mesh.qps[peer] = std::make_unique<QueuePair>(context, peer);
      record = mesh.qps[peer]->localRecord();
    }
    const auto bytes = encode(record);
    std::copy(bytes.begin(), bytes.end(), out.begin() + QpRecord::kBytes * peer);
  }
  done("qp-create");
  boot.alltoall(out.data(), in.data(), QpRecord::kBytes);

  // Every record is checked before the first ibv_modify_qp.
  std::vector<QpRecord> remote(static_cast<std::size_t>(n));
  for (int peer = 0; peer < n; ++peer) {
    if (peer == me) continue;
    remote[peer] = decodeQpRecord(in.data() + QpRecord::kBytes * peer);
    validateRemote(remote[peer], mesh.qps[peer]->localRecord(), RecordOrigin{me, peer}, context.needsGrh());
  }
  done("qp-exchange");
  for (int peer = 0; peer < n; ++peer)
    if (peer != me) mesh.qps[peer]->connect(remote[peer]);
  done("qp-connect");
  return mesh;
}

void exchangePlaceholders(Bootstrap& boot) {
  const int n = boot.size();
  const int me = boot.rank();
  std::vector<unsigned char> out(QpRecord::kBytes * n), in(QpRecord::kBytes * n);
  for (int peer = 0; peer < n; ++peer) {
    QpRecord record;
    record.srcRank = static_cast<std::uint32_t>(me);
    record.dstRank = static_cast<std::uint32_t>(peer);
    record.flags = QpRecord::kNoQp;
    const auto bytes = encode(record);
    std::copy(bytes.begin(), bytes.end(), out.begin() + QpRecord::kBytes * peer);
  }
  boot.alltoall(out.data(), in.data(), QpRecord::kBytes);
  for (int peer = 0; peer < n; ++peer)
    if (peer != me) validatePlaceholder(decodeQpRecord(in.data() + QpRecord::kBytes * peer), RecordOrigin{me, peer});
}

std::vector<MrRecord> exchangeMemoryRegions(Bootstrap& boot, const MemoryRegion& local, std::size_t minLength) {
  const int n = boot.size();
  const int me = boot.rank();
  std::vector<unsigned char> all(MrRecord::kBytes * n);
  const auto mine = encode(local.record());
  std::copy(mine.begin(), mine.end(), all.begin() + MrRecord::kBytes * me);
  boot.allgather(all.data(), MrRecord::kBytes);
  std::vector<MrRecord> records(static_cast<std::size_t>(n));
  for (int peer = 0; peer < n; ++peer) {
    records[peer] = decodeMrRecord(all.data() + MrRecord::kBytes * peer);
    if (peer != me) validateRemote(records[peer], minLength, RecordOrigin{me, peer, "rdma mr-exchange"});
  }
  return records;
}

void rdmaWriteAllgather(Bootstrap& boot, Context& context, Mesh& mesh, const MemoryRegion& buffer,
                        std::size_t blockBytes, const std::vector<MrRecord>& remote) {
  const int n = boot.size();
  const int me = boot.rank();
  const auto offset = static_cast<std::uint64_t>(me) * blockBytes;
  const auto* block = static_cast<const unsigned char*>(buffer.addr()) + offset;
  for (int peer = 0; peer < n; ++peer)
    if (peer != me)
      mesh.qps[peer]->postWrite(block, blockBytes, buffer.lkey(), remote[peer].addr + offset, remote[peer].rkey);
  context.waitCompletions(n - 1, boot.timeout());
  // A write's completion means the peer acknowledged it; after the barrier all writes to us are in.
  boot.barrier();
}

}  // namespace tether::rdma
