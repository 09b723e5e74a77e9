// The RC queue-pair state machine as ibv_modify_qp(3) specifies it: which
// transitions exist, which mask bits each requires and which it accepts, and
// which attribute values hardware refuses. Everything else is EINVAL.
#include <cerrno>

#include "fakeverbs/fake_state.hpp"
#include "tether/rdma/gid.hpp"

namespace tether::rdma {
namespace {

struct Rule {
  int required;  // besides IBV_QP_STATE
  int optional;
};

constexpr int kRtsOptional =
    IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE | IBV_QP_MIN_RNR_TIMER;

// nullptr: the transition does not exist for RC.
const Rule* ruleFor(ibv_qp_state from, ibv_qp_state to) {
  static constexpr Rule toReset{0, 0};
  static constexpr Rule toError{0, 0};
  static constexpr Rule resetToInit{IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, 0};
  static constexpr Rule initToInit{0, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS};
  static constexpr Rule initToRtr{
      IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
      IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX};
  static constexpr Rule rtrToRts{
      IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC, kRtsOptional};
  static constexpr Rule rtsToRts{0, kRtsOptional};
  if (to == IBV_QPS_RESET) return &toReset;
  if (to == IBV_QPS_ERR) return &toError;
  if (from == IBV_QPS_RESET && to == IBV_QPS_INIT) return &resetToInit;
  if (from == IBV_QPS_INIT && to == IBV_QPS_INIT) return &initToInit;
  if (from == IBV_QPS_INIT && to == IBV_QPS_RTR) return &initToRtr;
  if (from == IBV_QPS_RTR && to == IBV_QPS_RTS) return &rtrToRts;
  if (from == IBV_QPS_RTS && to == IBV_QPS_RTS) return &rtsToRts;
  return nullptr;
}

constexpr std::uint32_t kMax24 = (1u << 24) - 1;
constexpr unsigned kKnownAccess =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

// The address vector against the QP's port.
bool addressVectorValid(const FakeVerbs::State& state, const FakeQpState& qp, const ibv_ah_attr& ah,
                        std::uint8_t portNumber) {
  const auto* ctx = state.contexts.at(qp.qp.context).get();
  const FakePort* port = state.port(*ctx, portNumber);
  if (port == nullptr || (ah.port_num != 0 && ah.port_num != portNumber)) return false;
  if (ah.sl > 15) return false;
  const bool ethernet = port->linkLayer == IBV_LINK_LAYER_ETHERNET;
  if ((ethernet || port->grhRequired) && !ah.is_global) return false;  // RoCE has no LIDs
  if (!ethernet && (ah.dlid == 0 || ah.dlid >= 0xc000)) return false;  // unicast LIDs only
  if (ah.is_global) {
    if (isZeroGid(ah.grh.dgid)) return false;
    const auto index = ah.grh.sgid_index;
    if (index >= port->gids.size() || !port->gids[index]) return false;
    const std::uint32_t type = port->gids[index]->type;
    if (ethernet == (type == IBV_GID_TYPE_IB)) return false;  // IB GID on RoCE or the reverse
  }
  return true;
}

}  // namespace

int checkFakeModify(const FakeVerbs::State& state, const FakeQpState& qp, const ibv_qp_attr& attr, int mask) {
  const ibv_qp_state from = qp.attr.qp_state;
  const ibv_qp_state to = (mask & IBV_QP_STATE) ? attr.qp_state : from;
  if ((mask & IBV_QP_CUR_STATE) && attr.cur_qp_state != from) return EINVAL;
  const Rule* rule = ruleFor(from, to);
  if (rule == nullptr) return EINVAL;
  const int given = mask & ~IBV_QP_STATE;
  if ((given & rule->required) != rule->required) return EINVAL;         // a required bit missing
  if ((given & ~(rule->required | rule->optional)) != 0) return EINVAL;  // a bit not accepted

  const auto* ctx = state.contexts.at(qp.qp.context).get();
  const FakeDevice& device = state.device(*ctx);
  const std::uint8_t portNumber = (mask & IBV_QP_PORT) ? attr.port_num : qp.attr.port_num;
  const FakePort* port = state.port(*ctx, portNumber);
  if ((mask & IBV_QP_PORT) && port == nullptr) return EINVAL;
  if ((mask & IBV_QP_PKEY_INDEX) && (port == nullptr || attr.pkey_index >= port->pkeyTableLength)) return EINVAL;
  if ((mask & IBV_QP_ACCESS_FLAGS) && (attr.qp_access_flags & ~kKnownAccess) != 0) return EINVAL;
  if ((mask & IBV_QP_AV) && !addressVectorValid(state, qp, attr.ah_attr, portNumber)) return EINVAL;
  if ((mask & IBV_QP_PATH_MTU) && (port == nullptr || attr.path_mtu < IBV_MTU_256 || attr.path_mtu > port->activeMtu))
    return EINVAL;
  if ((mask & IBV_QP_DEST_QPN) && (attr.dest_qp_num == 0 || attr.dest_qp_num > kMax24)) return EINVAL;
  if ((mask & IBV_QP_RQ_PSN) && attr.rq_psn > kMax24) return EINVAL;
  if ((mask & IBV_QP_SQ_PSN) && attr.sq_psn > kMax24) return EINVAL;
  if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && attr.max_dest_rd_atomic > device.maxQpRdAtomic) return EINVAL;
  if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && attr.max_rd_atomic > device.maxQpInitRdAtomic) return EINVAL;
  if ((mask & IBV_QP_MIN_RNR_TIMER) && attr.min_rnr_timer > 31) return EINVAL;
  if ((mask & IBV_QP_TIMEOUT) && attr.timeout > 31) return EINVAL;
  if ((mask & IBV_QP_RETRY_CNT) && attr.retry_cnt > 7) return EINVAL;
  if ((mask & IBV_QP_RNR_RETRY) && attr.rnr_retry > 7) return EINVAL;
  return 0;
}

void applyFakeModify(FakeQpState& qp, const ibv_qp_attr& attr, int mask) {
  ibv_qp_attr& a = qp.attr;
  if (mask & IBV_QP_PKEY_INDEX) a.pkey_index = attr.pkey_index;
  if (mask & IBV_QP_PORT) a.port_num = attr.port_num;
  if (mask & IBV_QP_ACCESS_FLAGS) a.qp_access_flags = attr.qp_access_flags;
  if (mask & IBV_QP_AV) a.ah_attr = attr.ah_attr;
  if (mask & IBV_QP_PATH_MTU) a.path_mtu = attr.path_mtu;
  if (mask & IBV_QP_DEST_QPN) a.dest_qp_num = attr.dest_qp_num;
  if (mask & IBV_QP_RQ_PSN) a.rq_psn = attr.rq_psn;
  if (mask & IBV_QP_SQ_PSN) a.sq_psn = attr.sq_psn;
  if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) a.max_dest_rd_atomic = attr.max_dest_rd_atomic;
  if (mask & IBV_QP_MAX_QP_RD_ATOMIC) a.max_rd_atomic = attr.max_rd_atomic;
  if (mask & IBV_QP_MIN_RNR_TIMER) a.min_rnr_timer = attr.min_rnr_timer;
  if (mask & IBV_QP_TIMEOUT) a.timeout = attr.timeout;
  if (mask & IBV_QP_RETRY_CNT) a.retry_cnt = attr.retry_cnt;
  if (mask & IBV_QP_RNR_RETRY) a.rnr_retry = attr.rnr_retry;
  if (mask & IBV_QP_STATE) {
    a.qp_state = attr.qp_state;
    if (attr.qp_state == IBV_QPS_RESET) {  // RESET forgets the connection
      const ibv_qp_attr fresh{};
      a = fresh;
      a.qp_state = IBV_QPS_RESET;
    }
  }
  a.cur_qp_state = a.qp_state;
  qp.qp.state = a.qp_state;
}

}  // namespace tether::rdma
