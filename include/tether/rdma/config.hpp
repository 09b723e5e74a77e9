// tether/rdma/config.hpp — tunables of the QP bring-up, read from the environment.
//
// Variables (defaults in brackets; docs/rdma.md explains each):
//   TETHER_IB_HCA          device[:port] to use            [first device with an active port]
//   TETHER_IB_GID_INDEX    GID index to use, 0..255        [chosen, see gid.hpp]
//   TETHER_IB_ADDR_FAMILY  AF_INET or AF_INET6 for RoCE    [AF_INET]
//   TETHER_IB_QP           queue pair attributes, key=value,... (each key at most once):
//     timeout=x        local ACK timeout, 4.096us*2^x, 1..31 [20, about 4.3 s]
//     retry_cnt=x      transport retries, 0..7               [7]
//     rnr_retry=x      RNR retries, 0..7 (7 = forever)       [7]
//     min_rnr_timer=x  RNR NAK timer code, 0..31             [12, 0.64 ms]
//     sl=x             service level, 0..15                  [0]
//     tc=x             traffic class, 0..255                 [0]
//     rd_atomic=x      outstanding RDMA reads, 1..16         [1]
//   e.g. TETHER_IB_QP=sl=3,tc=106; the fields below set them programmatically.
// A malformed or out-of-range value is Error{InvalidArgument} naming the variable.
#pragma once

#include <cstdint>
#include <string>

namespace tether::rdma {

struct Config {
  std::string hca;    // device name; empty: first device with an active port
  int hcaPort = 0;    // 0: first active port of the device
  int gidIndex = -1;  // -1: choose
  int addressFamily;  // AF_INET or AF_INET6
  std::uint8_t timeout = 20;
  std::uint8_t retryCount = 7;
  std::uint8_t rnrRetry = 7;
  std::uint8_t minRnrTimer = 12;
  std::uint8_t serviceLevel = 0;
  std::uint8_t trafficClass = 0;
  std::uint8_t hopLimit = 255;
  std::uint8_t rdAtomic = 1;
  int queueDepth = 128;  // send/recv work requests per QP; CQ holds depth * QPs

  Config();
  // `rank` (when known) prefixes error messages.
  static Config fromEnvironment(int rank = -1);
};

// Parses "mlx5_0" or "mlx5_0:1" into config.hca / config.hcaPort; throws InvalidArgument.
void parseHca(const std::string& text, Config& config);

}  // namespace tether::rdma
