#include "model.hpp"

#include <fmt/format.h>

namespace tether::sim {

std::string describe(const Params& p) {
  return fmt::format(
      "latency {:g} us (local {:g} us), NIC {:g} GB/s, send {:g} us, recv {:g} us, copy {:g} GB/s, wake {:g} us, "
      "switch {:g} us, call {:g} us, crowd {:g} us past {:g} ranks per core, "
      "connect {:g} RTT + {:g} us, link budget {}, eager {} B, quantum {:g} us, start spread {:g} us, seed {}, "
      "host-local table {}",
      p.latencyUs, p.localLatencyUs, p.nicGBps, p.sendUs, p.recvUs, p.cpuGBps, p.wakeUs, p.switchUs, p.callUs,
      p.crowdUs, p.crowdRanks, p.connectRtts, p.connectUs, p.maxLinks, p.eagerBytes, p.quantumUs, p.startSpreadUs,
      p.seed, p.tableTree ? fmt::format("down a tree of leaders, radix {}", p.hostTreeRadix) : "star");
}

}  // namespace tether::sim
