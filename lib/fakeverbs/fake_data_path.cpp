// The fake backend's data path: RDMA writes between QPs of this process.
//
// A write checks what an RC responder checks — the target QP exists, is
// connected back to us and is at least RTR, the rkey names a region of the
// target's PD with remote-write access, and the range is inside it — and
// completes with the status hardware would report when a check fails.
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "fakeverbs/fake_state.hpp"

namespace tether::rdma {
namespace {

bool inside(const ibv_mr& mr, std::uint64_t addr, std::uint64_t length) {
  const auto begin = reinterpret_cast<std::uint64_t>(mr.addr);
  return addr >= begin && length <= mr.length && addr - begin <= mr.length - length;
}

ibv_wc_status executeWrite(FakeQpState& qp, const ibv_send_wr& wr, std::uint32_t& bytes) {
  bytes = 0;
  for (int i = 0; i < wr.num_sge; ++i) {
    const ibv_sge& sge = wr.sg_list[i];
    FakeMrState* mr = findFakeMr(sge.lkey);
    if (mr == nullptr || mr->pd != qp.pd || !inside(mr->mr, sge.addr, sge.length)) return IBV_WC_LOC_PROT_ERR;
    bytes += sge.length;
  }
  FakeQpState* target = findFakeQp(qp.attr.dest_qp_num);
  if (target == nullptr || target->attr.dest_qp_num != qp.qp.qp_num ||
      (target->attr.qp_state != IBV_QPS_RTR && target->attr.qp_state != IBV_QPS_RTS))
    return IBV_WC_RETRY_EXC_ERR;  // nobody answers: the requester retries, then gives up
  FakeMrState* remote = findFakeMr(wr.wr.rdma.rkey);
  if (remote == nullptr || remote->pd != target->pd || !(remote->access & IBV_ACCESS_REMOTE_WRITE) ||
      !(target->attr.qp_access_flags & IBV_ACCESS_REMOTE_WRITE) || !inside(remote->mr, wr.wr.rdma.remote_addr, bytes))
    return IBV_WC_REM_ACCESS_ERR;
  auto* out = reinterpret_cast<unsigned char*>(wr.wr.rdma.remote_addr);
  for (int i = 0; i < wr.num_sge; ++i) {
    std::memmove(out, reinterpret_cast<const void*>(wr.sg_list[i].addr), wr.sg_list[i].length);
    out += wr.sg_list[i].length;
  }
  return IBV_WC_SUCCESS;
}

void complete(FakeQpState& qp, const ibv_send_wr& wr, ibv_wc_status status, std::uint32_t bytes) {
  ibv_wc wc{};
  wc.wr_id = wr.wr_id;
  wc.status = status;
  wc.opcode = IBV_WC_RDMA_WRITE;
  wc.qp_num = qp.qp.qp_num;
  wc.byte_len = bytes;
  qp.sendCq->completions.push_back(wc);
}

}  // namespace

int FakeVerbs::postSend(ibv_qp* handle, ibv_send_wr* wr, ibv_send_wr** badWr) {
  std::lock_guard<std::mutex> lock(fakeMutex());
  auto it = state_->qps.find(handle);
  if (it == state_->qps.end()) return EINVAL;
  FakeQpState& qp = *it->second;
  for (; wr != nullptr; wr = wr->next) {
    const bool usable = qp.attr.qp_state == IBV_QPS_RTS || qp.attr.qp_state == IBV_QPS_ERR;
    if (!usable || wr->opcode != IBV_WR_RDMA_WRITE || wr->num_sge < 0 ||
        static_cast<std::uint32_t>(wr->num_sge) > qp.cap.max_send_sge) {
      if (badWr != nullptr) *badWr = wr;
      return EINVAL;
    }
    if (qp.attr.qp_state == IBV_QPS_ERR) {  // an errored QP flushes what is posted
      complete(qp, *wr, IBV_WC_WR_FLUSH_ERR, 0);
      continue;
    }
    std::uint32_t bytes = 0;
    const ibv_wc_status status = executeWrite(qp, *wr, bytes);
    if (status != IBV_WC_SUCCESS || qp.signalAll || (wr->send_flags & IBV_SEND_SIGNALED))
      complete(qp, *wr, status, bytes);
    if (status != IBV_WC_SUCCESS) {
      qp.attr.qp_state = qp.attr.cur_qp_state = IBV_QPS_ERR;
      qp.qp.state = IBV_QPS_ERR;
    }
  }
  return 0;
}

}  // namespace tether::rdma
