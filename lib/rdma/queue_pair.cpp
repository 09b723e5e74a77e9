// QueuePair and MemoryRegion: the RC QP life cycle with exact attribute masks.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

#include <fmt/format.h>

#include "tether/error.hpp"
#include "tether/rdma/context.hpp"

namespace tether::rdma {
namespace {

std::string errnoText(int error) { return fmt::format("{} (errno {})", std::strerror(error), error); }

std::uint32_t randomPsn() {
  static thread_local std::mt19937 engine{std::random_device{}()};
  return std::uniform_int_distribution<std::uint32_t>(0, (1u << 24) - 1)(engine);
}

}  // namespace

const char* qpStateName(ibv_qp_state state) {
  switch (state) {
    case IBV_QPS_RESET:
      return "RESET";
    case IBV_QPS_INIT:
      return "INIT";
    case IBV_QPS_RTR:
      return "RTR";
    case IBV_QPS_RTS:
      return "RTS";
    case IBV_QPS_SQD:
      return "SQD";
    case IBV_QPS_SQE:
      return "SQE";
    case IBV_QPS_ERR:
      return "ERR";
    default:
      return "UNKNOWN";
  }
}

std::string describeQpAttrMask(int mask) {
  static constexpr std::pair<int, const char*> kBits[] = {{IBV_QP_STATE, "STATE"},
                                                          {IBV_QP_CUR_STATE, "CUR_STATE"},
                                                          {IBV_QP_EN_SQD_ASYNC_NOTIFY, "EN_SQD_ASYNC_NOTIFY"},
                                                          {IBV_QP_ACCESS_FLAGS, "ACCESS_FLAGS"},
                                                          {IBV_QP_PKEY_INDEX, "PKEY_INDEX"},
                                                          {IBV_QP_PORT, "PORT"},
                                                          {IBV_QP_QKEY, "QKEY"},
                                                          {IBV_QP_AV, "AV"},
                                                          {IBV_QP_PATH_MTU, "PATH_MTU"},
                                                          {IBV_QP_TIMEOUT, "TIMEOUT"},
                                                          {IBV_QP_RETRY_CNT, "RETRY_CNT"},
                                                          {IBV_QP_RNR_RETRY, "RNR_RETRY"},
                                                          {IBV_QP_RQ_PSN, "RQ_PSN"},
                                                          {IBV_QP_MAX_QP_RD_ATOMIC, "MAX_QP_RD_ATOMIC"},
                                                          {IBV_QP_ALT_PATH, "ALT_PATH"},
                                                          {IBV_QP_MIN_RNR_TIMER, "MIN_RNR_TIMER"},
                                                          {IBV_QP_SQ_PSN, "SQ_PSN"},
                                                          {IBV_QP_MAX_DEST_RD_ATOMIC, "MAX_DEST_RD_ATOMIC"},
                                                          {IBV_QP_PATH_MIG_STATE, "PATH_MIG_STATE"},
                                                          {IBV_QP_CAP, "CAP"},
                                                          {IBV_QP_DEST_QPN, "DEST_QPN"},
                                                          {IBV_QP_RATE_LIMIT, "RATE_LIMIT"}};
  std::string text;
  int rest = mask;
  for (const auto& [bit, name] : kBits) {
    if ((mask & bit) == 0) continue;
    if (!text.empty()) text += '|';
    text += name;
    rest &= ~bit;
  }
  if (rest != 0) text += fmt::format("{}{:#x}", text.empty() ? "" : "|", rest);
  return text.empty() ? "0" : text;
}

QueuePair::QueuePair(Context& context, int peer) : context_(context), peer_(peer) {
  ibv_qp_init_attr init{};
  init.send_cq = context.cq();
  init.recv_cq = context.cq();
  init.qp_type = IBV_QPT_RC;
  init.sq_sig_all = 0;
  init.cap.max_send_wr = static_cast<std::uint32_t>(context.config().queueDepth);
  init.cap.max_recv_wr = static_cast<std::uint32_t>(context.config().queueDepth);
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  qp_ = context.verbs().createQp(context.pd(), &init);
  if (qp_ == nullptr)
    throw Error(ErrorCode::System,
                fmt::format("rank {}: rdma: ibv_create_qp(RC) for peer {} on {} failed: {}", context.rank(), peer,
                            context.where(), errnoText(errno)),
                context.rank(), peer);
  psn_ = randomPsn();
}

QueuePair::~QueuePair() { context_.verbs().destroyQp(qp_); }

std::uint32_t QueuePair::qpn() const { return qp_->qp_num; }

QpRecord QueuePair::localRecord() const {
  QpRecord r;
  r.srcRank = static_cast<std::uint32_t>(context_.rank());
  r.dstRank = static_cast<std::uint32_t>(peer_);
  r.qpn = qp_->qp_num;
  r.psn = psn_;
  r.lid = context_.portAttr().lid;
  r.port = context_.portNumber();
  r.linkLayer = context_.portAttr().link_layer;
  r.activeMtu = static_cast<std::uint8_t>(context_.portAttr().active_mtu);
  r.gidIndex = static_cast<std::uint8_t>(std::max(0, context_.gid().index));
  std::memcpy(r.gid.data(), context_.gid().gid.raw, 16);
  r.maxRdAtomic = static_cast<std::uint8_t>(context_.maxRdAtomic());
  r.maxDestRdAtomic = static_cast<std::uint8_t>(context_.maxDestRdAtomic());
  return r;
}

void QueuePair::modify(ibv_qp_attr& attr, int mask, const char* transition, ibv_qp_state next) {
  const int rc = context_.verbs().modifyQp(qp_, &attr, mask);
  if (rc != 0)
    throw Error(ErrorCode::System,
                fmt::format("rank {}: rdma: ibv_modify_qp({}) of QP {:#x} for peer {} on {} failed: {}; "
                            "attr_mask {:#x} = {}",
                            context_.rank(), transition, qpn(), peer_, context_.where(), errnoText(rc), mask,
                            describeQpAttrMask(mask)),
                context_.rank(), peer_);
  state_ = next;
}

void QueuePair::toInit() {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = context_.portNumber();
  attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  modify(attr, kInitMask, "RESET->INIT", IBV_QPS_INIT);
}

void QueuePair::toRtr(const QpRecord& remote) {
  const Config& config = context_.config();
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = static_cast<ibv_mtu>(negotiatePathMtu(localRecord(), remote));
  attr.dest_qp_num = remote.qpn;
  attr.rq_psn = remote.psn;
  attr.max_dest_rd_atomic = static_cast<std::uint8_t>(context_.maxDestRdAtomic());
  attr.min_rnr_timer = config.minRnrTimer;
  attr.ah_attr.port_num = context_.portNumber();
  attr.ah_attr.sl = config.serviceLevel;
  attr.ah_attr.dlid = remote.linkLayer == IBV_LINK_LAYER_INFINIBAND ? remote.lid : 0;
  if (context_.needsGrh()) {
    attr.ah_attr.is_global = 1;
    std::memcpy(attr.ah_attr.grh.dgid.raw, remote.gid.data(), 16);
    attr.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(context_.gid().index);
    attr.ah_attr.grh.hop_limit = config.hopLimit;
    attr.ah_attr.grh.traffic_class = config.trafficClass;
  }
  modify(attr, kRtrMask, "INIT->RTR", IBV_QPS_RTR);
  remoteMaxDestRdAtomic_ = remote.maxDestRdAtomic;
}

void QueuePair::toRts() {
  const Config& config = context_.config();
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = psn_;
  attr.timeout = config.timeout;
  attr.retry_cnt = config.retryCount;
  attr.rnr_retry = config.rnrRetry;
  // Never more reads in flight than the peer accepts.
  attr.max_rd_atomic = static_cast<std::uint8_t>(std::min<int>(context_.maxRdAtomic(), remoteMaxDestRdAtomic_));
  modify(attr, kRtsMask, "RTR->RTS", IBV_QPS_RTS);
}

void QueuePair::connect(const QpRecord& remote) {
  validateRemote(remote, localRecord(), RecordOrigin{context_.rank(), peer_}, context_.needsGrh());
  toInit();
  toRtr(remote);
  toRts();
}

void QueuePair::postWrite(const void* local, std::size_t bytes, std::uint32_t lkey, std::uint64_t remoteAddr,
                          std::uint32_t rkey) {
  if (bytes > (1u << 31))  // one SGE carries at most 2 GiB (ibv_sge.length is 32 bits)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("rank {}: rdma: RDMA write of {} bytes to peer {} exceeds 2 GiB per work request",
                            context_.rank(), bytes, peer_),
                context_.rank(), peer_);
  ibv_sge sge{};
  sge.addr = reinterpret_cast<std::uint64_t>(local);
  sge.length = static_cast<std::uint32_t>(bytes);
  sge.lkey = lkey;
  ibv_send_wr wr{};
  wr.wr_id = static_cast<std::uint64_t>(peer_);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = remoteAddr;
  wr.wr.rdma.rkey = rkey;
  ibv_send_wr* bad = nullptr;
  if (const int rc = context_.verbs().postSend(qp_, &wr, &bad); rc != 0)
    throw Error(ErrorCode::System,
                fmt::format("rank {}: rdma: ibv_post_send(RDMA_WRITE {} bytes) to peer {} on QP {:#x} "
                            "({}) failed: {}",
                            context_.rank(), bytes, peer_, qpn(), qpStateName(state_), errnoText(rc)),
                context_.rank(), peer_);
}

MemoryRegion::MemoryRegion(Context& context, void* addr, std::size_t length, int access)
    : context_(context), addr_(addr), length_(length) {
  mr_ = context.verbs().regMr(context.pd(), addr, length, access);
  if (mr_ == nullptr)
    throw Error(ErrorCode::System,
                fmt::format("rank {}: rdma: ibv_reg_mr({} bytes, access {:#x}) on {} failed: {}", context.rank(),
                            length, access, context.where(), errnoText(errno)),
                context.rank());
}

MemoryRegion::~MemoryRegion() { context_.verbs().deregMr(mr_); }

MrRecord MemoryRegion::record() const {
  MrRecord r;
  r.rank = static_cast<std::uint32_t>(context_.rank());
  r.rkey = mr_->rkey;
  r.addr = reinterpret_cast<std::uint64_t>(addr_);
  r.length = length_;
  return r;
}

}  // namespace tether::rdma
