// tether/rdma/fake_verbs.hpp — a verbs backend without hardware, for tests and demos.
//
// Models what the bring-up depends on: devices and ports (link layer, LID,
// MTU, state, GRH-required flag), GID tables with empty slots and IB / RoCE v1 /
// RoCE v2 entries, and the RC QP state machine. ibv_modify_qp is checked the
// way hardware checks it: a transition that is not allowed, an attribute mask
// missing a required bit or carrying one the transition does not accept, or an
// invalid attribute value (QPN 0 or >= 2^24, PSN >= 2^24, path MTU above the
// port's, no GRH on RoCE, zero DLID on InfiniBand, a GID index pointing at an
// empty slot, ...) fails with EINVAL and leaves the QP unchanged.
//
// RDMA writes move data only between QPs of the same process (ranks as
// threads); a write to a QP number that is not in this process completes with
// IBV_WC_RETRY_EXC_ERR, as an unanswered write does on a real fabric.
// QP numbers are unique per process and seeded from the pid, so forked ranks
// get different ones.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tether/rdma/verbs.hpp"

namespace tether::rdma {

struct FakeGid {
  std::array<std::uint8_t, 16> raw{};
  std::uint32_t type = IBV_GID_TYPE_IB;  // IBV_GID_TYPE_IB, _ROCE_V1 or _ROCE_V2
};

struct FakePort {
  ibv_port_state state = IBV_PORT_ACTIVE;
  std::uint8_t linkLayer = IBV_LINK_LAYER_INFINIBAND;
  std::uint16_t lid = 0;
  ibv_mtu maxMtu = IBV_MTU_4096;
  ibv_mtu activeMtu = IBV_MTU_4096;
  bool grhRequired = false;
  std::uint16_t pkeyTableLength = 1;
  // Slot i is GID index i; std::nullopt is an empty slot.
  std::vector<std::optional<FakeGid>> gids;
};

struct FakeDevice {
  std::string name;
  std::vector<FakePort> ports;  // port numbers start at 1
  int maxQpRdAtomic = 16;       // responder resources (max_dest_rd_atomic)
  int maxQpInitRdAtomic = 16;   // initiator depth (max_rd_atomic)
  int maxQpWr = 16384;
  int maxCqe = 65536;
};

struct FakeFabric {
  std::vector<FakeDevice> devices;
  // Non-zero: listDevices() fails with this errno (ENOSYS models a host without RDMA).
  int listErrno = 0;

  // One RoCE device "fake_roce0", port 1, Ethernet, GID table
  // [0] fe80:: link-local v1, [1] same v2, [2] ::ffff:10.a.b.c v1, [3] same v2,
  // [4] empty, [5] a global IPv6 v2 — addresses derived from the pid.
  static FakeFabric roce();
  // One InfiniBand device "fake_ib0", port 1, LID derived from the pid, GID [0] fe80::.
  static FakeFabric infiniband();
  // No devices: listDevices() returns ENOSYS like libibverbs on this kind of host.
  static FakeFabric noDevices();
};

class FakeVerbs : public Verbs {
 public:
  explicit FakeVerbs(FakeFabric fabric);
  ~FakeVerbs() override;
  FakeVerbs(const FakeVerbs&) = delete;
  FakeVerbs& operator=(const FakeVerbs&) = delete;

  // Inspection for tests.
  int modifyQpCalls() const;     // every call, accepted or not
  int modifyQpRejected() const;  // calls answered with an errno
  ibv_qp_state qpState(const ibv_qp* qp) const;
  // Whether a QP with this number lives in this process (so RDMA writes to it move data).
  static bool hasLocalQp(std::uint32_t qpn);

  const char* backendName() const override { return "fake"; }
  int listDevices(std::vector<std::string>& names) override;
  ibv_context* openDevice(const std::string& name) override;
  int closeDevice(ibv_context* context) override;
  int queryDevice(ibv_context* context, ibv_device_attr* attr) override;
  int queryPort(ibv_context* context, std::uint8_t port, ibv_port_attr* attr) override;
  long queryGidTable(ibv_context* context, ibv_gid_entry* entries, std::size_t maxEntries) override;
  int queryGidEx(ibv_context* context, std::uint32_t port, std::uint32_t index, ibv_gid_entry* entry) override;
  ibv_pd* allocPd(ibv_context* context) override;
  int deallocPd(ibv_pd* pd) override;
  ibv_cq* createCq(ibv_context* context, int entries) override;
  int destroyCq(ibv_cq* cq) override;
  ibv_qp* createQp(ibv_pd* pd, ibv_qp_init_attr* attr) override;
  int destroyQp(ibv_qp* qp) override;
  int modifyQp(ibv_qp* qp, ibv_qp_attr* attr, int attrMask) override;
  int queryQp(ibv_qp* qp, ibv_qp_attr* attr, int attrMask, ibv_qp_init_attr* init) override;
  ibv_mr* regMr(ibv_pd* pd, void* addr, std::size_t length, int access) override;
  int deregMr(ibv_mr* mr) override;
  int postSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** badWr) override;
  int pollCq(ibv_cq* cq, int entries, ibv_wc* wc) override;

  struct State;  // lib/rdma/fake_state.hpp

 private:
  std::unique_ptr<State> state_;
};

}  // namespace tether::rdma
