// FakeFabric presets and the process-wide registries of the fake backend.
#include <unistd.h>

#include <cerrno>
#include <unordered_map>

#include "fakeverbs/fake_state.hpp"

namespace tether::rdma {
namespace {

// A per-process value that differs between forked ranks.
std::uint32_t pidHash() { return static_cast<std::uint32_t>(::getpid()) * 2654435761u; }

FakeGid gid(std::array<std::uint8_t, 16> raw, std::uint32_t type) {
  FakeGid g;
  g.raw = raw;
  g.type = type;
  return g;
}

std::unordered_map<std::uint32_t, FakeQpState*>& qpRegistry() {
  static std::unordered_map<std::uint32_t, FakeQpState*> registry;
  return registry;
}
std::unordered_map<std::uint32_t, FakeMrState*>& mrRegistry() {
  static std::unordered_map<std::uint32_t, FakeMrState*> registry;
  return registry;
}

}  // namespace

FakeFabric FakeFabric::roce() {
  const std::uint32_t h = pidHash();
  const std::uint8_t a = static_cast<std::uint8_t>(h >> 24), b = static_cast<std::uint8_t>(h >> 16),
                     c = static_cast<std::uint8_t>((h >> 8) | 1);
  const std::array<std::uint8_t, 16> linkLocal{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x00, 0x5e, 0xff, 0xfe, a, b, c};
  const std::array<std::uint8_t, 16> ipv4{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, a, b, c};
  const std::array<std::uint8_t, 16> global{0xfd, 0x00, 0x74, 0x65, 0, 0, 0, 0, 0, 0, 0, 0, 0, a, b, c};
  FakePort port;
  port.linkLayer = IBV_LINK_LAYER_ETHERNET;
  port.lid = 0;
  port.maxMtu = IBV_MTU_4096;
  port.activeMtu = IBV_MTU_1024;  // a 1500-byte Ethernet MTU gives RoCE 1024
  port.gids = {gid(linkLocal, IBV_GID_TYPE_ROCE_V1),
               gid(linkLocal, IBV_GID_TYPE_ROCE_V2),
               gid(ipv4, IBV_GID_TYPE_ROCE_V1),
               gid(ipv4, IBV_GID_TYPE_ROCE_V2),
               std::nullopt,
               gid(global, IBV_GID_TYPE_ROCE_V2)};
  FakeFabric fabric;
  fabric.devices.push_back(FakeDevice{"fake_roce0", {port}});
  return fabric;
}

FakeFabric FakeFabric::infiniband() {
  const std::uint32_t h = pidHash();
  FakePort port;
  port.linkLayer = IBV_LINK_LAYER_INFINIBAND;
  port.lid = static_cast<std::uint16_t>(1 + (h >> 8) % 0xbffe);  // unicast LIDs are 1..0xbfff
  port.maxMtu = IBV_MTU_4096;
  port.activeMtu = IBV_MTU_4096;
  port.gids = {gid({0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x6b, 0x4b, 0x03, 0, static_cast<std::uint8_t>(h >> 24),
                    static_cast<std::uint8_t>(h >> 16), static_cast<std::uint8_t>(h >> 8)},
                   IBV_GID_TYPE_IB)};
  FakeFabric fabric;
  fabric.devices.push_back(FakeDevice{"fake_ib0", {port}});
  return fabric;
}

FakeFabric FakeFabric::noDevices() {
  FakeFabric fabric;
  fabric.listErrno = ENOSYS;
  return fabric;
}

std::mutex& fakeMutex() {
  static std::mutex mutex;
  return mutex;
}

// Both counters restart from the pid after a fork, so forked ranks draw
// different numbers (callers hold fakeMutex()).
namespace {
std::uint32_t nextFromPid(std::uint32_t& counter, pid_t& owner, std::uint32_t seed) {
  if (owner != ::getpid()) {
    owner = ::getpid();
    counter = seed;
  }
  return counter++;
}
}  // namespace

std::uint32_t nextFakeQpn() {
  // 24-bit QP numbers; 0 and 1 are the special QPs.
  static std::uint32_t counter = 0;
  static pid_t owner = 0;
  for (;;) {
    const std::uint32_t qpn = nextFromPid(counter, owner, (pidHash() >> 8) & 0xffffff) & 0xffffff;
    if (qpn > 1 && qpRegistry().count(qpn) == 0) return qpn;
  }
}

std::uint32_t nextFakeKey() {
  static std::uint32_t counter = 0;
  static pid_t owner = 0;
  for (;;) {
    const std::uint32_t key = nextFromPid(counter, owner, pidHash() | 1);
    if (key != 0 && mrRegistry().count(key) == 0) return key;
  }
}

void registerFakeQp(FakeQpState* qp) { qpRegistry()[qp->qp.qp_num] = qp; }
void unregisterFakeQp(const FakeQpState* qp) { qpRegistry().erase(qp->qp.qp_num); }
FakeQpState* findFakeQp(std::uint32_t qpn) {
  auto it = qpRegistry().find(qpn);
  return it == qpRegistry().end() ? nullptr : it->second;
}
void registerFakeMr(FakeMrState* mr) { mrRegistry()[mr->mr.rkey] = mr; }
void unregisterFakeMr(const FakeMrState* mr) { mrRegistry().erase(mr->mr.rkey); }
FakeMrState* findFakeMr(std::uint32_t rkey) {
  auto it = mrRegistry().find(rkey);
  return it == mrRegistry().end() ? nullptr : it->second;
}

const FakePort* FakeVerbs::State::port(const FakeContextState& c, std::uint32_t number) const {
  const auto& ports = device(c).ports;
  if (number == 0 || number > ports.size()) return nullptr;
  return &ports[number - 1];
}

}  // namespace tether::rdma
