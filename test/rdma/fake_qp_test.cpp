// The fake backend's RC state machine: exact masks, EINVAL like hardware.
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstring>
#include <vector>

#include "tether/rdma/context.hpp"
#include "tether/rdma/fake_verbs.hpp"

using namespace tether::rdma;

namespace {

// A PD, CQ and RC QP on one fake device, driven with raw verbs calls.
struct RawQp {
  FakeVerbs verbs;
  ibv_context* context = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  ibv_port_attr port{};

  explicit RawQp(FakeFabric fabric = FakeFabric::roce()) : verbs(std::move(fabric)) {
    std::vector<std::string> names;
    REQUIRE(verbs.listDevices(names) == 0);
    context = verbs.openDevice(names.at(0));
    REQUIRE(context != nullptr);
    REQUIRE(verbs.queryPort(context, 1, &port) == 0);
    pd = verbs.allocPd(context);
    cq = verbs.createCq(context, 64);
    ibv_qp_init_attr init{};
    init.send_cq = init.recv_cq = cq;
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = init.cap.max_recv_wr = 16;
    init.cap.max_send_sge = init.cap.max_recv_sge = 1;
    qp = verbs.createQp(pd, &init);
    REQUIRE(qp != nullptr);
  }
  ~RawQp() {
    verbs.destroyQp(qp);
    verbs.destroyCq(cq);
    verbs.deallocPd(pd);
    verbs.closeDevice(context);
  }
  bool ethernet() const { return port.link_layer == IBV_LINK_LAYER_ETHERNET; }

  ibv_qp_attr initAttr() const {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    return a;
  }
  ibv_qp_attr rtrAttr(uint32_t destQpn) const {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = destQpn;
    a.rq_psn = 7;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.port_num = 1;
    if (ethernet()) {
      a.ah_attr.is_global = 1;
      a.ah_attr.grh.sgid_index = 3;
      a.ah_attr.grh.hop_limit = 255;
      a.ah_attr.grh.dgid.raw[15] = 1;
      a.ah_attr.grh.dgid.raw[10] = a.ah_attr.grh.dgid.raw[11] = 0xff;
    } else {
      a.ah_attr.dlid = 33;
    }
    return a;
  }
  ibv_qp_attr rtsAttr() const {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 9;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    return a;
  }
  int modify(ibv_qp_attr a, int mask) { return verbs.modifyQp(qp, &a, mask); }
  ibv_qp_state state() const { return verbs.qpState(qp); }
};

// The single bits of a mask.
std::vector<int> bitsOf(int mask) {
  std::vector<int> bits;
  for (int bit = 1; bit != 0 && bit <= mask; bit <<= 1)
    if (mask & bit) bits.push_back(bit);
  return bits;
}

}  // namespace

TEST_CASE("RESET->INIT->RTR->RTS with the ibv_modify_qp(3) masks succeeds", "[rdma][fake]") {
  for (auto fabric : {FakeFabric::roce(), FakeFabric::infiniband()}) {
    RawQp q(fabric);
    INFO("link layer " << int(q.port.link_layer));
    CHECK(q.state() == IBV_QPS_RESET);
    REQUIRE(q.modify(q.initAttr(), kInitMask) == 0);
    CHECK(q.state() == IBV_QPS_INIT);
    REQUIRE(q.modify(q.rtrAttr(0x99), kRtrMask) == 0);
    CHECK(q.state() == IBV_QPS_RTR);
    REQUIRE(q.modify(q.rtsAttr(), kRtsMask) == 0);
    CHECK(q.state() == IBV_QPS_RTS);
    ibv_qp_attr got{};
    ibv_qp_init_attr init{};
    REQUIRE(q.verbs.queryQp(q.qp, &got, IBV_QP_STATE, &init) == 0);
    CHECK(got.qp_state == IBV_QPS_RTS);
    CHECK(got.dest_qp_num == 0x99);
    CHECK(got.sq_psn == 9);
    CHECK(got.path_mtu == IBV_MTU_1024);
    CHECK(q.verbs.modifyQpRejected() == 0);
  }
}

TEST_CASE("every required bit missing from a transition is EINVAL and changes nothing", "[rdma][fake]") {
  struct Step {
    const char* name;
    int mask;
  };
  for (const Step step : {Step{"RESET->INIT", kInitMask}, Step{"INIT->RTR", kRtrMask}, Step{"RTR->RTS", kRtsMask}}) {
    for (int bit : bitsOf(step.mask)) {
      if (bit == IBV_QP_STATE) continue;  // without STATE it is a different call, tested below
      RawQp q;
      // Walk to the state before this step.
      if (step.mask != kInitMask) REQUIRE(q.modify(q.initAttr(), kInitMask) == 0);
      if (step.mask == kRtsMask) REQUIRE(q.modify(q.rtrAttr(0x99), kRtrMask) == 0);
      const ibv_qp_state before = q.state();
      const ibv_qp_attr attr = step.mask == kInitMask  ? q.initAttr()
                               : step.mask == kRtrMask ? q.rtrAttr(0x99)
                                                       : q.rtsAttr();
      INFO(step.name << " without " << describeQpAttrMask(bit));
      CHECK(q.modify(attr, step.mask & ~bit) == EINVAL);
      CHECK(q.state() == before);
      CHECK(q.modify(attr, step.mask) == 0);  // the right mask still works afterwards
    }
  }
}

TEST_CASE("a bit the transition does not accept is EINVAL", "[rdma][fake]") {
  RawQp q;
  CHECK(q.modify(q.initAttr(), kInitMask | IBV_QP_QKEY) == EINVAL);      // QKEY is for UD
  CHECK(q.modify(q.initAttr(), kInitMask | IBV_QP_PATH_MTU) == EINVAL);  // too early
  REQUIRE(q.modify(q.initAttr(), kInitMask) == 0);
  CHECK(q.modify(q.rtrAttr(0x99), kRtrMask | IBV_QP_SQ_PSN) == EINVAL);  // belongs to RTS
  CHECK(q.modify(q.rtrAttr(0x99), kRtrMask | IBV_QP_PORT) == EINVAL);    // not after INIT
  REQUIRE(q.modify(q.rtrAttr(0x99), kRtrMask) == 0);
  CHECK(q.modify(q.rtsAttr(), kRtsMask | IBV_QP_DEST_QPN) == EINVAL);  // belongs to RTR
  CHECK(q.modify(q.rtsAttr(), kRtsMask | IBV_QP_AV) == EINVAL);
  CHECK(q.modify(q.rtsAttr(), kRtsMask | IBV_QP_MIN_RNR_TIMER) == 0);  // optional at RTS
  CHECK(q.verbs.modifyQpRejected() == 6);
}

TEST_CASE("skipping a state or going backwards is EINVAL", "[rdma][fake]") {
  RawQp q;
  CHECK(q.modify(q.rtrAttr(0x99), kRtrMask) == EINVAL);  // RESET->RTR
  CHECK(q.modify(q.rtsAttr(), kRtsMask) == EINVAL);      // RESET->RTS
  REQUIRE(q.modify(q.initAttr(), kInitMask) == 0);
  CHECK(q.modify(q.rtsAttr(), kRtsMask) == EINVAL);  // INIT->RTS
  REQUIRE(q.modify(q.rtrAttr(0x99), kRtrMask) == 0);
  ibv_qp_attr back = q.initAttr();
  CHECK(q.modify(back, IBV_QP_STATE) == EINVAL);  // RTR->INIT
  ibv_qp_attr wrongCurrent = q.rtsAttr();
  wrongCurrent.cur_qp_state = IBV_QPS_INIT;
  CHECK(q.modify(wrongCurrent, kRtsMask | IBV_QP_CUR_STATE) == EINVAL);
  ibv_qp_attr err{};
  err.qp_state = IBV_QPS_ERR;
  CHECK(q.modify(err, IBV_QP_STATE) == 0);  // any -> ERR
  ibv_qp_attr reset{};
  reset.qp_state = IBV_QPS_RESET;
  CHECK(q.modify(reset, IBV_QP_STATE | IBV_QP_PORT) == EINVAL);
  CHECK(q.modify(reset, IBV_QP_STATE) == 0);  // any -> RESET
  CHECK(q.state() == IBV_QPS_RESET);
}

TEST_CASE("invalid attribute values are EINVAL like hardware", "[rdma][fake]") {
  struct Case {
    const char* what;
    void (*corrupt)(ibv_qp_attr&);
  };
  const Case rtrCases[] = {
      {"dest QPN 0", [](ibv_qp_attr& a) { a.dest_qp_num = 0; }},
      {"dest QPN 2^24", [](ibv_qp_attr& a) { a.dest_qp_num = 1u << 24; }},
      {"RQ PSN 2^24", [](ibv_qp_attr& a) { a.rq_psn = 1u << 24; }},
      {"path MTU above the port's", [](ibv_qp_attr& a) { a.path_mtu = IBV_MTU_4096; }},
      {"path MTU 0", [](ibv_qp_attr& a) { a.path_mtu = static_cast<ibv_mtu>(0); }},
      {"RoCE without GRH", [](ibv_qp_attr& a) { a.ah_attr.is_global = 0; }},
      {"zero DGID", [](ibv_qp_attr& a) { std::memset(a.ah_attr.grh.dgid.raw, 0, 16); }},
      {"SGID index of an empty slot", [](ibv_qp_attr& a) { a.ah_attr.grh.sgid_index = 4; }},
      {"SGID index beyond the table", [](ibv_qp_attr& a) { a.ah_attr.grh.sgid_index = 40; }},
      {"min RNR timer 32", [](ibv_qp_attr& a) { a.min_rnr_timer = 32; }},
      {"responder resources above the device's", [](ibv_qp_attr& a) { a.max_dest_rd_atomic = 17; }},
  };
  for (const auto& c : rtrCases) {
    INFO(c.what);
    RawQp q;
    REQUIRE(q.modify(q.initAttr(), kInitMask) == 0);
    ibv_qp_attr attr = q.rtrAttr(0x99);
    c.corrupt(attr);
    CHECK(q.modify(attr, kRtrMask) == EINVAL);
    CHECK(q.state() == IBV_QPS_INIT);
  }
  const Case rtsCases[] = {
      {"timeout 32", [](ibv_qp_attr& a) { a.timeout = 32; }},
      {"retry count 8", [](ibv_qp_attr& a) { a.retry_cnt = 8; }},
      {"RNR retry 8", [](ibv_qp_attr& a) { a.rnr_retry = 8; }},
      {"SQ PSN 2^24", [](ibv_qp_attr& a) { a.sq_psn = 1u << 24; }},
  };
  for (const auto& c : rtsCases) {
    INFO(c.what);
    RawQp q;
    REQUIRE(q.modify(q.initAttr(), kInitMask) == 0);
    REQUIRE(q.modify(q.rtrAttr(0x99), kRtrMask) == 0);
    ibv_qp_attr attr = q.rtsAttr();
    c.corrupt(attr);
    CHECK(q.modify(attr, kRtsMask) == EINVAL);
    CHECK(q.state() == IBV_QPS_RTR);
  }
  RawQp q;
  ibv_qp_attr badPort = q.initAttr();
  badPort.port_num = 2;
  CHECK(q.modify(badPort, kInitMask) == EINVAL);
}

TEST_CASE("InfiniBand address vectors need a unicast DLID", "[rdma][fake]") {
  RawQp q(FakeFabric::infiniband());
  REQUIRE(q.modify(q.initAttr(), kInitMask) == 0);
  ibv_qp_attr attr = q.rtrAttr(0x99);
  attr.ah_attr.dlid = 0;
  CHECK(q.modify(attr, kRtrMask) == EINVAL);
  attr.ah_attr.dlid = 0xc001;  // multicast
  CHECK(q.modify(attr, kRtrMask) == EINVAL);
}

TEST_CASE("QP numbers are 24-bit, non-zero and unique", "[rdma][fake]") {
  RawQp a, b;
  CHECK(a.qp->qp_num != b.qp->qp_num);
  CHECK(a.qp->qp_num > 1);
  CHECK(a.qp->qp_num < (1u << 24));
}

TEST_CASE("resources in use cannot be destroyed; unknown handles are EINVAL", "[rdma][fake]") {
  RawQp q;
  CHECK(q.verbs.destroyCq(q.cq) == EBUSY);
  CHECK(q.verbs.deallocPd(q.pd) == EBUSY);
  CHECK(q.verbs.closeDevice(q.context) == EBUSY);
  ibv_qp_attr attr{};
  ibv_qp stranger{};
  CHECK(q.verbs.modifyQp(&stranger, &attr, IBV_QP_STATE) == EINVAL);
  ibv_qp_init_attr ud{};
  ud.send_cq = ud.recv_cq = q.cq;
  ud.qp_type = IBV_QPT_UD;
  ud.cap.max_send_wr = 1;
  ud.cap.max_send_sge = 1;
  errno = 0;
  CHECK(q.verbs.createQp(q.pd, &ud) == nullptr);
  CHECK(errno == EOPNOTSUPP);
  char buffer[64];
  errno = 0;
  CHECK(q.verbs.regMr(q.pd, buffer, sizeof(buffer), IBV_ACCESS_REMOTE_WRITE) == nullptr);  // needs LOCAL_WRITE
  CHECK(errno == EINVAL);
}

TEST_CASE("a host without RDMA reports ENOSYS from the device list", "[rdma][fake]") {
  FakeVerbs verbs(FakeFabric::noDevices());
  std::vector<std::string> names{"stale"};
  CHECK(verbs.listDevices(names) == ENOSYS);
  CHECK(names.empty());
}
