// tether-sim's model parameters (docs/scale.md explains each one and its
// default). Time is kept in integer picoseconds, so runs are exact and
// deterministic; parameters are given in microseconds and GB/s.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

namespace tether::sim {

using Time = std::int64_t;  // picoseconds

inline Time fromUs(double us) { return static_cast<Time>(std::llround(us * 1e6)); }
inline double toUs(Time t) { return static_cast<double>(t) / 1e6; }
// Picoseconds to move `bytes` at `gbytesPerS` (10^9 bytes per second).
inline Time perBytes(std::uint64_t bytes, double gbytesPerS) {
  return gbytesPerS <= 0 ? 0 : static_cast<Time>(std::llround(static_cast<double>(bytes) * 1e3 / gbytesPerS));
}

struct Params {
  // Machines: N = hosts * ranksPerHost ranks; each host has `cores` cores
  // and one NIC that all its ranks share.
  int hosts = 1;
  int ranksPerHost = 8;
  int cores = 32;

  // Network. A message between hosts leaves through the sender host's NIC
  // (FIFO, nicGBps), travels latencyUs, and enters through the receiver
  // host's NIC (FIFO, nicGBps; only contention adds time there). Between
  // ranks of one host (TCP loopback) it takes localLatencyUs, no NIC.
  double latencyUs = 10;
  double localLatencyUs = 2;
  double nicGBps = 10;
  std::size_t headerBytes = 48;  // tether's frame header, on the wire with every message

  // CPU, on the host's cores (a rank runs on one core at a time; when more
  // ranks have work than the host has cores they queue, FIFO). Per message:
  // sendUs at the sender, recvUs at the receiver, plus bytes at cpuGBps on
  // both (the copies into and out of the kernel). wakeUs each time a rank
  // gets a core (a wake-up from epoll_wait), switchUs more when it takes the
  // core from another rank (a process switch: only when ranks outnumber
  // cores); callUs once per collective call per rank (entering the call,
  // building its plan).
  double sendUs = 3;
  double recvUs = 4;
  double cpuGBps = 8;
  double wakeUs = 6;
  double switchUs = 0;
  double callUs = 5;
  // The crowd term (docs/scale.md, "the one fit"): the caches hold the
  // working sets of about crowdRanks ranks per core; on a host that runs
  // more, a rank that gets a core finds the share 1 - crowdRanks / (R / C)
  // of its own evicted, and its wake-up costs crowdUs times that share more.
  double crowdUs = 0;
  double crowdRanks = 128;
  double quantumUs = 3000;  // a rank that ran this long yields its core to a waiting rank

  // The first message between a pair opens the connection: the dialler
  // spends connectUs of CPU, then after (2 * connectRtts - 1) one-way
  // latencies the acceptor spends connectUs, and one latency later the
  // dialler's link is up. Three round trips: TCP's SYN, SYN-ACK, ACK (the
  // acceptor's accept), then challenge, hello (checked by the acceptor) and
  // welcome (docs/wire-protocol.md).
  double connectRtts = 3;
  double connectUs = 40;

  // The soft link budget of the collectives (TETHER_MAX_LINKS, lib/core/
  // world_links.cpp): a rank that opens or admits a link while it holds this
  // many closes its least recently used idle one with the idle goodbye. 0:
  // none. The rendezvous owns its links and is not limited.
  int maxLinks = 64;
  // The tree rows' radix (TETHER_ALGO=tree_radix); 0: the library's own
  // (dc::treeRadix: flat up to 64 ranks, then at most 48 links at the root).
  int treeRadix = 0;

  // Sends up to eagerBytes are copied and forgotten (a settle does not wait
  // for them); larger ones are waited for until the NIC has sent them.
  std::size_t eagerBytes = 64 * 1024;

  // Ranks start the rendezvous at seeded random times in [0, startSpreadUs]
  // (rank 0 at 0); the seed also draws the all-to-all-v block sizes.
  double startSpreadUs = 0;
  std::uint64_t seed = 1;

  // The host-local rendezvous (--rendezvous host-local, and auto, the
  // default): with tableTree (what the code does: lib/rendezvous/leader_tree.*)
  // the table goes down a k-nomial tree of the leaders of this radix
  // (rdv::kDefaultTreeRadix, as tether's tree rendezvous); without it
  // (--table-tree=false, the code before the leader tree) the root sends it
  // to every leader, a star.
  bool tableTree = true;
  int hostTreeRadix = 8;

  int nranks() const { return hosts * ranksPerHost; }
  // Like the real code: some host runs more ranks than it has cores.
  bool cpuBound() const { return ranksPerHost > cores; }
  // The crowd term's CPU per wake-up.
  double crowdedWakeUs() const {
    const double perCore = static_cast<double>(ranksPerHost) / cores;
    return perCore > crowdRanks ? crowdUs * (1 - crowdRanks / perCore) : 0;
  }
};

// One line naming every parameter, for reports and reproducibility.
std::string describe(const Params& p);

}  // namespace tether::sim
