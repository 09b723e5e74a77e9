#include "model.hpp"

#include <fmt/format.h>

namespace tether::sim {

std::string describe(const Params& p) {
  return fmt::format(
      "latency {} us (local {} us), NIC {} GB/s, send {} us, recv {} us, copy {} GB/s, wake {} us, call {} us, "
      "connect {} RTT + {} us, eager {} B, quantum {} us, start spread {} us, seed {}",
      p.latencyUs, p.localLatencyUs, p.nicGBps, p.sendUs, p.recvUs, p.cpuGBps, p.wakeUs, p.callUs, p.connectRtts,
      p.connectUs, p.eagerBytes, p.quantumUs, p.startSpreadUs, p.seed);
}

}  // namespace tether::sim
