// The RDMA half of the all-gather setup example: the bring-up every RDMA
// runtime performs once its bootstrap is up.
//
//   1. agree whether every rank has a device (one-byte all-gather)
//   2. open the device, create one RC QP per peer
//   3. exchange QP records by all-to-all, validate them, walk the QPs to RTS
//   4. all-gather MR records, barrier
//   5. RDMA-write all-gather of a buffer, then a byte-exact check
#include "rdma_flow.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "tether/error.hpp"
#include "tether/rdma/context.hpp"
#include "tether/rdma/fake_verbs.hpp"
#include "tether/rdma/mesh.hpp"

namespace {

using namespace tether;
using namespace tether::rdma;

constexpr std::size_t kBlockBytes = 64 * 1024;

// Appends the time since the last mark to `phases` under `name`.
class PhaseClock {
 public:
  explicit PhaseClock(RdmaFlowResult& result) : result_(result) {}
  void mark(const char* name) {
    const auto now = std::chrono::steady_clock::now();
    result_.phaseMs.emplace_back(name, std::chrono::duration<double, std::milli>(now - last_).count());
    last_ = now;
  }

 private:
  RdmaFlowResult& result_;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

unsigned char pattern(int rank, std::size_t i) {
  return static_cast<unsigned char>((rank * 131 + i * 7 + (i >> 8)) ^ 0x5a);
}

FakeFabric fakeFabricFromEnvironment() {
  const char* layer = std::getenv("TETHER_FAKE_LINK_LAYER");
  if (layer == nullptr || *layer == '\0' || std::strcmp(layer, "roce") == 0) return FakeFabric::roce();
  if (std::strcmp(layer, "ib") == 0) return FakeFabric::infiniband();
  throw Error(ErrorCode::InvalidArgument,
              fmt::format("TETHER_FAKE_LINK_LAYER=\"{}\" is not valid (want roce or ib)", layer));
}

// All ranks answer the same yes/no question; returns the ranks that said no.
std::vector<int> ranksWithout(Bootstrap& boot, bool have) {
  std::vector<unsigned char> all(static_cast<std::size_t>(boot.size()), 0);
  all[static_cast<std::size_t>(boot.rank())] = have ? 1 : 0;
  boot.allgather(all.data(), 1);
  std::vector<int> without;
  for (int r = 0; r < boot.size(); ++r)
    if (all[static_cast<std::size_t>(r)] == 0) without.push_back(r);
  return without;
}

void withoutQps(Bootstrap& boot, PhaseClock& clock) {
  exchangePlaceholders(boot);
  clock.mark("record-exchange");
  boot.barrier();
  clock.mark("barrier");
}

// Why this rank has no devices, e.g. "ENOSYS" or "none found".
std::string deviceProblem(int listError) {
  if (listError == ENOSYS) return "ENOSYS";
  if (listError != 0) return fmt::format("{} (errno {})", std::strerror(listError), listError);
  return "none found";
}

}  // namespace

RdmaFlowResult runRdmaFlow(Bootstrap& boot, const std::string& mode) {
  if (mode != "auto" && mode != "real" && mode != "fake" && mode != "none")
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("--verbs={} is not valid (want auto, real, fake or none)", mode), boot.rank());
  RdmaFlowResult result;
  PhaseClock clock(result);
  const int me = boot.rank();
  const int n = boot.size();
  if (mode == "none") {
    withoutQps(boot, clock);
    result.note = "verbs=none: exchanged records without QPs";
    return result;
  }

  std::unique_ptr<Verbs> verbs;
  if (mode == "fake") {
    verbs = std::make_unique<FakeVerbs>(fakeFabricFromEnvironment());
  } else {
    verbs = makeRealVerbs();
  }
  std::vector<std::string> names;
  const int listError = verbs->listDevices(names);
  const bool haveDevice = listError == 0 && !names.empty();
  const std::vector<int> without = ranksWithout(boot, haveDevice);
  clock.mark("device-check");
  if (!without.empty()) {
    const std::string who = haveDevice ? fmt::format("rank {} has", without.front()) : fmt::format("this rank has");
    const std::string why = haveDevice ? "" : deviceProblem(listError) + "; ";
    if (mode == "real")
      throw Error(ErrorCode::System,
                  fmt::format("rank {}: rdma: --verbs=real but {} no RDMA devices ({}{} of {} ranks without)", me, who,
                              why, without.size(), n),
                  me);
    withoutQps(boot, clock);
    result.note =
        haveDevice
            ? fmt::format("{} of {} ranks have no RDMA devices: exchanged records without QPs", without.size(), n)
            : fmt::format("no RDMA devices ({}): exchanged records without QPs", deviceProblem(listError));
    return result;
  }

  // Declared in teardown order: memory regions and QPs go before the context, the context before verbs.
  Context context(*verbs, Config::fromEnvironment(me), me, n - 1);
  clock.mark("open-device");
  Mesh mesh = connectMesh(boot, context, [&](const char* phase) { clock.mark(phase); });
  result.qpsAtRts = mesh.connected();

  std::vector<unsigned char> buffer(kBlockBytes * static_cast<std::size_t>(n), 0);
  for (std::size_t i = 0; i < kBlockBytes; ++i) buffer[me * kBlockBytes + i] = pattern(me, i);
  MemoryRegion region(context, buffer.data(), buffer.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  const std::vector<MrRecord> regions = exchangeMemoryRegions(boot, region, buffer.size());
  clock.mark("mr-exchange");
  boot.barrier();
  clock.mark("barrier");

  // The fake backend moves data only between QPs of one process (ranks as threads).
  bool canWrite = mode != "fake";
  if (!canWrite) {
    canWrite = true;
    for (int peer = 0; peer < n; ++peer) {
      if (peer == me) continue;
      ibv_qp_attr attr{};
      ibv_qp_init_attr init{};
      verbs->queryQp(mesh.qps[peer]->handle(), &attr, IBV_QP_DEST_QPN, &init);
      if (!FakeVerbs::hasLocalQp(attr.dest_qp_num)) canWrite = false;
    }
    canWrite = ranksWithout(boot, canWrite).empty();
  }
  if (canWrite) {
    rdmaWriteAllgather(boot, context, mesh, region, kBlockBytes, regions);
    clock.mark("rdma-write");
    for (int r = 0; r < n; ++r) {
      for (std::size_t i = 0; i < kBlockBytes; ++i) {
        const unsigned char got = buffer[r * kBlockBytes + i];
        if (got != pattern(r, i))
          throw Error(ErrorCode::Protocol,
                      fmt::format("rank {}: rdma-write all-gather: block of rank {} byte {} is {:#04x}, want {:#04x}",
                                  me, r, i, got, pattern(r, i)),
                      me, r);
      }
    }
    clock.mark("check");
    boot.barrier();  // nobody deregisters its buffer while a peer may still be writing into it
    result.rdmaWriteChecked = true;
  }
  result.note = fmt::format(
      "{} {}: {} QPs at RTS (active MTU {}, GID index {}){}", context.where(),
      context.portAttr().link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand", result.qpsAtRts,
      128 << context.portAttr().active_mtu, context.gid().index,
      result.rdmaWriteChecked
          ? fmt::format("; RDMA-write all-gather of {} KiB per rank checked byte for byte", kBlockBytes / 1024)
          : "; RDMA writes skipped (the fake backend moves data only within one process)");
  return result;
}
