// rdma/fake_state.hpp — the objects behind FakeVerbs' handles.
//
// Handles given out are real ibv_* structs owned here and found again through
// maps, so a stale or foreign pointer is EINVAL rather than a crash. One
// process-wide mutex guards every FakeVerbs instance: ranks that are threads
// reach each other's QPs and memory regions for RDMA writes.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <mutex>

#include "tether/rdma/fake_verbs.hpp"
#include "base/layer.hpp"

TETHER_LAYER(8, "fakeverbs");

namespace tether::rdma {

struct FakeContextState {
  ibv_context context{};
  int deviceIndex = 0;
  int pds = 0;
  int cqs = 0;
};

struct FakePdState {
  ibv_pd pd{};
  FakeContextState* owner = nullptr;
  int qps = 0;
  int mrs = 0;
};

struct FakeCqState {
  ibv_cq cq{};
  FakeContextState* owner = nullptr;
  int capacity = 0;
  int users = 0;
  std::deque<ibv_wc> completions;
};

struct FakeMrState {
  ibv_mr mr{};
  FakePdState* pd = nullptr;
  int access = 0;
};

struct FakeQpState {
  ibv_qp qp{};
  FakePdState* pd = nullptr;
  FakeCqState* sendCq = nullptr;
  FakeCqState* recvCq = nullptr;
  bool signalAll = false;
  ibv_qp_cap cap{};
  ibv_qp_attr attr{};  // attributes set so far; attr.qp_state is the state
};

struct FakeVerbs::State {
  FakeFabric fabric;
  int modifyCalls = 0;
  int modifyRejected = 0;
  std::map<const ibv_context*, std::unique_ptr<FakeContextState>> contexts;
  std::map<const ibv_pd*, std::unique_ptr<FakePdState>> pds;
  std::map<const ibv_cq*, std::unique_ptr<FakeCqState>> cqs;
  std::map<const ibv_qp*, std::unique_ptr<FakeQpState>> qps;
  std::map<const ibv_mr*, std::unique_ptr<FakeMrState>> mrs;

  const FakeDevice& device(const FakeContextState& c) const { return fabric.devices[c.deviceIndex]; }
  // nullptr for a port number the device does not have.
  const FakePort* port(const FakeContextState& c, std::uint32_t number) const;
};

// Guards all FakeVerbs state in the process.
std::mutex& fakeMutex();

// The RC state machine check of ibv_modify_qp: 0 or EINVAL (caller holds fakeMutex()).
int checkFakeModify(const FakeVerbs::State& state, const FakeQpState& qp, const ibv_qp_attr& attr, int mask);
// Copies the masked attributes into qp.attr and moves the state.
void applyFakeModify(FakeQpState& qp, const ibv_qp_attr& attr, int mask);

// Process-wide lookups for in-process RDMA writes (caller holds fakeMutex()).
void registerFakeQp(FakeQpState* qp);
void unregisterFakeQp(const FakeQpState* qp);
FakeQpState* findFakeQp(std::uint32_t qpn);
void registerFakeMr(FakeMrState* mr);
void unregisterFakeMr(const FakeMrState* mr);
FakeMrState* findFakeMr(std::uint32_t rkey);
std::uint32_t nextFakeQpn();
std::uint32_t nextFakeKey();

}  // namespace tether::rdma
