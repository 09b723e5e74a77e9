// tether/rdma/mesh.hpp — one connected RC QP to every other rank, over a Bootstrap.
//
// connectMesh() creates N-1 QPs, exchanges their records with one
// Bootstrap::alltoall (block j carries the record of the QP meant for rank j),
// validates every received record before any ibv_modify_qp, then walks each
// QP to RTS. A bad record fails the whole call with Error{Protocol} naming
// rank, peer, field and value.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "tether/bootstrap.hpp"
#include "tether/rdma/context.hpp"

namespace tether::rdma {

struct Mesh {
  // qps[peer]; nullptr at this rank's own index.
  std::vector<std::unique_ptr<QueuePair>> qps;
  int connected() const;  // QPs in RTS
};

// `phaseDone`, when given, is called after each phase: "qp-create",
// "qp-exchange" (all-to-all and validation), "qp-connect" (transitions).
Mesh connectMesh(Bootstrap& boot, Context& context, const std::function<void(const char* phase)>& phaseDone = nullptr);

// Sends every rank a kNoQp placeholder record through the same alltoall and
// validates what comes back: for ranks without devices, so the exchange
// pattern (and a swapped payload) is still checked.
void exchangePlaceholders(Bootstrap& boot);

// All-gathers MR records; each is validated (rank, non-zero address, at
// least `minLength` bytes). Entry r is rank r's region.
std::vector<MrRecord> exchangeMemoryRegions(Bootstrap& boot, const MemoryRegion& local, std::size_t minLength);

// RDMA-write all-gather over a connected mesh: block `rank` of `buffer`
// (blockBytes at offset rank * blockBytes) is written into the same place of
// every peer's region, the writes' completions are awaited (deadline: the
// bootstrap's timeout), then a barrier makes sure every peer's writes to us
// have completed too. On return every block of `buffer` holds its rank's data.
void rdmaWriteAllgather(Bootstrap& boot, Context& context, Mesh& mesh, const MemoryRegion& buffer,
                        std::size_t blockBytes, const std::vector<MrRecord>& remote);

}  // namespace tether::rdma
