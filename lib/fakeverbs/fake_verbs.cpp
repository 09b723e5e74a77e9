// FakeVerbs: devices, resources and the data path of the fake backend.
#include <cerrno>
#include <cstring>

#include "fakeverbs/fake_state.hpp"

namespace tether::rdma {
namespace {

template <typename Map, typename Key>
auto* lookup(Map& map, Key key) {
  auto it = map.find(key);
  return it == map.end() ? nullptr : it->second.get();
}

// nullptr with errno, the way libibverbs reports a failed create.
template <typename T>
T* fail(int error) {
  errno = error;
  return nullptr;
}

}  // namespace

FakeVerbs::FakeVerbs(FakeFabric fabric) : state_(std::make_unique<State>()) { state_->fabric = std::move(fabric); }

FakeVerbs::~FakeVerbs() {
  std::lock_guard<std::mutex> lock(fakeMutex());
  for (auto& [handle, qp] : state_->qps) unregisterFakeQp(qp.get());
  for (auto& [handle, mr] : state_->mrs) unregisterFakeMr(mr.get());
}

int FakeVerbs::modifyQpCalls() const {
  std::lock_guard<std::mutex> lock(fakeMutex());
  return state_->modifyCalls;
}

int FakeVerbs::modifyQpRejected() const {
  std::lock_guard<std::mutex> lock(fakeMutex());
  return state_->modifyRejected;
}

ibv_qp_state FakeVerbs::qpState(const ibv_qp* qp) const {
  std::lock_guard<std::mutex> lock(fakeMutex());
  auto* q = lookup(state_->qps, qp);
  return q == nullptr ? IBV_QPS_UNKNOWN : q->attr.qp_state;
}

bool FakeVerbs::hasLocalQp(std::uint32_t qpn) {
  std::lock_guard<std::mutex> lock(fakeMutex());
  return findFakeQp(qpn) != nullptr;
}

int FakeVerbs::listDevices(std::vector<std::string>& names) {
  names.clear();
  if (state_->fabric.listErrno != 0) return state_->fabric.listErrno;
  for (const auto& device : state_->fabric.devices) names.push_back(device.name);
  return 0;
}

ibv_context* FakeVerbs::openDevice(const std::string& name) {
  std::lock_guard<std::mutex> lock(fakeMutex());
  const auto& devices = state_->fabric.devices;
  for (std::size_t i = 0; i < devices.size(); ++i) {
    if (devices[i].name != name) continue;
    auto c = std::make_unique<FakeContextState>();
    c->deviceIndex = static_cast<int>(i);
    ibv_context* handle = &c->context;
    state_->contexts.emplace(handle, std::move(c));
    return handle;
  }
  return fail<ibv_context>(ENODEV);
}

int FakeVerbs::closeDevice(ibv_context* context) {
  std::lock_guard<std::mutex> lock(fakeMutex());
  auto* c = lookup(state_->contexts, context);
  if (c == nullptr) return EINVAL;
  if (c->pds != 0 || c->cqs != 0) return EBUSY;
  state_->contexts.erase(context);
  return 0;
}

int FakeVerbs::queryDevice(ibv_context* context, ibv_device_attr* attr) {
  std::lock_guard<std::mutex> lock(fakeMutex());
  auto* c = lookup(state_->contexts, context);
  if (c == nullptr) return EINVAL;
  const FakeDevice& d = state_->device(*c);
  *attr = ibv_device_attr{};
  std::strncpy(attr->fw_ver, "fake-1.0", sizeof(attr->fw_ver) - 1);
  attr->phys_port_cnt = static_cast<std::uint8_t>(d.ports.size());
  attr->max_qp_rd_atom = d.maxQpRdAtomic;
  attr->max_qp_init_rd_atom = d.maxQpInitRdAtomic;
  attr->max_qp_wr = d.maxQpWr;
  attr->max_cqe = d.maxCqe;
  attr->max_qp = 1 << 16;
  attr->max_sge = 30;
  return 0;
}

int FakeVerbs::queryPort(ibv_context* context, std::uint8_t port, ibv_port_attr* attr) {
  std::lock_guard<std::mutex> lock(fakeMutex());
  auto* c = lookup(state_->contexts, context);
  if (c == nullptr) return EINVAL;
  const FakePort* p = state_->port(*c, port);
  if (p == nullptr) return EINVAL;
  *attr = ibv_port_attr{};
  attr->state = p->state;
  attr->max_mtu = p->maxMtu;
  attr->active_mtu = p->activeMtu;
  attr->gid_tbl_len = static_cast<int>(p->gids.size());
  attr->pkey_tbl_len = p->pkeyTableLength;
  attr->lid = p->lid;
  attr->link_layer = p->linkLayer;
  attr->flags = p->grhRequired ? IBV_QPF_GRH_REQUIRED : 0;
  attr->max_msg_sz = 1u << 30;
  return 0;
}

namespace {
ibv_gid_entry entryOf(const FakeGid& g, std::uint32_t port, std::uint32_t index) {
  ibv_gid_entry e{};
  std::memcpy(e.gid.raw, g.raw.data(), 16);
  e.gid_index = index;
  e.port_num = port;
  e.gid_type = g.type;
  return e;
}
}  // namespace

long FakeVerbs::queryGidTable(ibv_context* context, ibv_gid_entry* entries, std::size_t maxEntries) {
  std::lock_guard<std::mutex> lock(fakeMutex());
  auto* c = lookup(state_->contexts, context);
  if (c == nullptr) return -EINVAL;
  std::size_t n = 0;
  const auto& ports = state_->device(*c).ports;
  for (std::size_t p = 0; p < ports.size(); ++p) {
    for (std::size_t i = 0; i < ports[p].gids.size(); ++i) {
      if (!ports[p].gids[i]) continue;
      if (n == maxEntries) return -EINVAL;  // as libibverbs: the array is too small
      entries[n++] = entryOf(*ports[p].gids[i], static_cast<std::uint32_t>(p + 1), static_cast<std::uint32_t>(i));
    }
  }
  return static_cast<long>(n);
}

int FakeVerbs::queryGidEx(ibv_context* context, std::uint32_t port, std::uint32_t index, ibv_gid_entry* entry) {
  std::lock_guard<std::mutex> lock(fakeMutex());
  auto* c = lookup(state_->contexts, context);
  if (c == nullptr) return EINVAL;
  const FakePort* p = state_->port(*c, port);
  if (p == nullptr || index >= p->gids.size()) return EINVAL;
  if (!p->gids[index]) return ENODATA;
  *entry = entryOf(*p->gids[index], port, index);
  return 0;
}

ibv_pd* FakeVerbs::allocPd(ibv_context* context) {
  std::lock_guard<std::mutex> lock(fakeMutex());
  auto* c = lookup(state_->contexts, context);
  if (c == nullptr) return fail<ibv_pd>(EINVAL);
  auto pd = std::make_unique<FakePdState>();
  pd->pd.context = context;
  pd->owner = c;
  ++c->pds;
  ibv_pd* handle = &pd->pd;
  state_->pds.emplace(handle, std::move(pd));
  return handle;
}

int FakeVerbs::deallocPd(ibv_pd* pd) {
  std::lock_guard<std::mutex> lock(fakeMutex());
  auto* p = lookup(state_->pds, pd);
  if (p == nullptr) return EINVAL;
  if (p->qps != 0 || p->mrs != 0) return EBUSY;
  --p->owner->pds;
  state_->pds.erase(pd);
  return 0;
}

ibv_cq* FakeVerbs::createCq(ibv_context* context, int entries) {
  std::lock_guard<std::mutex> lock(fakeMutex());
  auto* c = lookup(state_->contexts, context);
  if (c == nullptr || entries < 1 || entries > state_->device(*c).maxCqe) return fail<ibv_cq>(EINVAL);
  auto cq = std::make_unique<FakeCqState>();
  cq->cq.context = context;
  cq->cq.cqe = entries;
  cq->owner = c;
  cq->capacity = entries;
  ++c->cqs;
  ibv_cq* handle = &cq->cq;
  state_->cqs.emplace(handle, std::move(cq));
  return handle;
}

int FakeVerbs::destroyCq(ibv_cq* cq) {
  std::lock_guard<std::mutex> lock(fakeMutex());
  auto* q = lookup(state_->cqs, cq);
  if (q == nullptr) return EINVAL;
  if (q->users != 0) return EBUSY;
  --q->owner->cqs;
  state_->cqs.erase(cq);
  return 0;
}

ibv_qp* FakeVerbs::createQp(ibv_pd* pd, ibv_qp_init_attr* attr) {
  std::lock_guard<std::mutex> lock(fakeMutex());
  auto* p = lookup(state_->pds, pd);
  auto* sendCq = lookup(state_->cqs, attr->send_cq);
  auto* recvCq = lookup(state_->cqs, attr->recv_cq);
  if (p == nullptr || sendCq == nullptr || recvCq == nullptr) return fail<ibv_qp>(EINVAL);
  if (sendCq->owner != p->owner || recvCq->owner != p->owner) return fail<ibv_qp>(EINVAL);
  if (attr->qp_type != IBV_QPT_RC) return fail<ibv_qp>(EOPNOTSUPP);  // the fake models RC only
  const FakeDevice& d = state_->device(*p->owner);
  const auto& cap = attr->cap;
  if (cap.max_send_wr == 0 || cap.max_send_wr > static_cast<std::uint32_t>(d.maxQpWr) ||
      cap.max_recv_wr > static_cast<std::uint32_t>(d.maxQpWr) || cap.max_send_sge == 0 || cap.max_send_sge > 30)
    return fail<ibv_qp>(EINVAL);
  auto qp = std::make_unique<FakeQpState>();
  qp->qp.context = pd->context;
  qp->qp.pd = pd;
  qp->qp.send_cq = attr->send_cq;
  qp->qp.recv_cq = attr->recv_cq;
  qp->qp.qp_type = IBV_QPT_RC;
  qp->qp.state = IBV_QPS_RESET;
  qp->qp.qp_num = nextFakeQpn();
  qp->qp.qp_context = attr->qp_context;
  qp->pd = p;
  qp->sendCq = sendCq;
  qp->recvCq = recvCq;
  qp->signalAll = attr->sq_sig_all != 0;
  qp->cap = cap;
  qp->attr.qp_state = IBV_QPS_RESET;
  ++p->qps;
  ++sendCq->users;
  ++recvCq->users;
  registerFakeQp(qp.get());
  ibv_qp* handle = &qp->qp;
  state_->qps.emplace(handle, std::move(qp));
  return handle;
}

int FakeVerbs::destroyQp(ibv_qp* qp) {
  std::lock_guard<std::mutex> lock(fakeMutex());
  auto* q = lookup(state_->qps, qp);
  if (q == nullptr) return EINVAL;
  unregisterFakeQp(q);
  --q->pd->qps;
  --q->sendCq->users;
  --q->recvCq->users;
  state_->qps.erase(qp);
  return 0;
}

int FakeVerbs::modifyQp(ibv_qp* qp, ibv_qp_attr* attr, int attrMask) {
  std::lock_guard<std::mutex> lock(fakeMutex());
  ++state_->modifyCalls;
  auto* q = lookup(state_->qps, qp);
  const int rc = (q == nullptr || attr == nullptr) ? EINVAL : checkFakeModify(*state_, *q, *attr, attrMask);
  if (rc != 0) {
    ++state_->modifyRejected;
    return rc;
  }
  applyFakeModify(*q, *attr, attrMask);
  return 0;
}

int FakeVerbs::queryQp(ibv_qp* qp, ibv_qp_attr* attr, int /*attrMask*/, ibv_qp_init_attr* init) {
  std::lock_guard<std::mutex> lock(fakeMutex());
  auto* q = lookup(state_->qps, qp);
  if (q == nullptr) return EINVAL;
  *attr = q->attr;
  attr->cap = q->cap;
  if (init != nullptr) {
    *init = ibv_qp_init_attr{};
    init->send_cq = q->qp.send_cq;
    init->recv_cq = q->qp.recv_cq;
    init->cap = q->cap;
    init->qp_type = IBV_QPT_RC;
    init->sq_sig_all = q->signalAll ? 1 : 0;
  }
  return 0;
}

ibv_mr* FakeVerbs::regMr(ibv_pd* pd, void* addr, std::size_t length, int access) {
  std::lock_guard<std::mutex> lock(fakeMutex());
  auto* p = lookup(state_->pds, pd);
  if (p == nullptr || addr == nullptr || length == 0) return fail<ibv_mr>(EINVAL);
  if ((access & ~static_cast<int>(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                                  IBV_ACCESS_REMOTE_ATOMIC)) != 0)
    return fail<ibv_mr>(EINVAL);
  // ibv_reg_mr(3): remote write or atomic access needs local write.
  if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(access & IBV_ACCESS_LOCAL_WRITE))
    return fail<ibv_mr>(EINVAL);
  auto mr = std::make_unique<FakeMrState>();
  mr->mr.context = pd->context;
  mr->mr.pd = pd;
  mr->mr.addr = addr;
  mr->mr.length = length;
  mr->mr.lkey = mr->mr.rkey = nextFakeKey();
  mr->pd = p;
  mr->access = access;
  ++p->mrs;
  registerFakeMr(mr.get());
  ibv_mr* handle = &mr->mr;
  state_->mrs.emplace(handle, std::move(mr));
  return handle;
}

int FakeVerbs::deregMr(ibv_mr* mr) {
  std::lock_guard<std::mutex> lock(fakeMutex());
  auto* m = lookup(state_->mrs, mr);
  if (m == nullptr) return EINVAL;
  unregisterFakeMr(m);
  --m->pd->mrs;
  state_->mrs.erase(mr);
  return 0;
}

int FakeVerbs::pollCq(ibv_cq* cq, int entries, ibv_wc* wc) {
  std::lock_guard<std::mutex> lock(fakeMutex());
  auto* q = lookup(state_->cqs, cq);
  if (q == nullptr) return -EINVAL;
  int n = 0;
  while (n < entries && !q->completions.empty()) {
    wc[n++] = q->completions.front();
    q->completions.pop_front();
  }
  return n;
}

}  // namespace tether::rdma
