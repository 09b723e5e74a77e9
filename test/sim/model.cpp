#include "model.hpp"

#include <fmt/format.h>

namespace tether::sim {

std::string describe(const Params& p) {
  return fmt::format(
      "latency {:g} us (local {:g} us), NIC {:g} GB/s, send {:g} us, recv {:g} us, copy {:g} GB/s, wake {:g} us, "
      "switch {:g} us, call {:g} us, "
      "connect {:g} RTT + {:g} us, eager {} B, quantum {:g} us, start spread {:g} us, seed {}, host tree radix {}",
      p.latencyUs, p.localLatencyUs, p.nicGBps, p.sendUs, p.recvUs, p.cpuGBps, p.wakeUs, p.switchUs, p.callUs,
      p.connectRtts, p.connectUs, p.eagerBytes, p.quantumUs, p.startSpreadUs, p.seed, p.hostTreeRadix);
}

}  // namespace tether::sim
