// tether/rdma/context.hpp — one opened device port with its PD and CQ, the QPs
// and memory regions made on it.
//
// The bring-up follows the straight line every RC user walks: open device,
// query port, choose GID, allocate PD, create CQ, create QP (RESET), then
// RESET->INIT->RTR->RTS once the peer's record is known and validated. Each
// verbs failure becomes Error{System} naming the verb, the peer, errno and, for
// ibv_modify_qp, the attribute mask bit by bit.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "tether/rdma/config.hpp"
#include "tether/rdma/gid.hpp"
#include "tether/rdma/records.hpp"
#include "tether/rdma/verbs.hpp"

namespace tether::rdma {

class Context {
 public:
  // Opens config.hca (or the first device with an active port). `rank` is for messages.
  // `expectedQps` sizes the completion queue.
  Context(Verbs& verbs, const Config& config, int rank, int expectedQps);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  Verbs& verbs() { return verbs_; }
  const Config& config() const { return config_; }
  int rank() const { return rank_; }
  const std::string& deviceName() const { return deviceName_; }
  std::uint8_t portNumber() const { return port_; }
  const ibv_port_attr& portAttr() const { return portAttr_; }
  const GidChoice& gid() const { return gid_; }
  // Ethernet link layer, or an InfiniBand port that says it needs a GRH.
  bool needsGrh() const;
  // "mlx5_0:1 (libibverbs)", for messages.
  std::string where() const;
  int maxRdAtomic() const { return maxRdAtomic_; }
  int maxDestRdAtomic() const { return maxDestRdAtomic_; }

  ibv_context* handle() { return context_; }
  ibv_pd* pd() { return pd_; }
  ibv_cq* cq() { return cq_; }

  // Waits until `count` completions arrived or `timeout` passed, sleeping
  // between polls. Throws Error{System} on a failed completion (naming the
  // peer whose QP it came from) and Error{Timeout} at the deadline.
  void waitCompletions(int count, std::chrono::milliseconds timeout);

 private:
  void openDevice();
  void choosePort(ibv_context* context, const std::string& name);

  Verbs& verbs_;
  Config config_;
  int rank_;
  std::string deviceName_;
  std::uint8_t port_ = 0;
  ibv_port_attr portAttr_{};
  GidChoice gid_;
  int maxRdAtomic_ = 1;
  int maxDestRdAtomic_ = 1;
  ibv_context* context_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
};

class QueuePair {
 public:
  // Creates an RC QP in RESET for the connection to `peer`.
  QueuePair(Context& context, int peer);
  ~QueuePair();
  QueuePair(const QueuePair&) = delete;
  QueuePair& operator=(const QueuePair&) = delete;

  int peer() const { return peer_; }
  std::uint32_t qpn() const;
  ibv_qp* handle() { return qp_; }

  // What the peer needs to connect to this QP.
  QpRecord localRecord() const;

  // The three transitions, each with exactly the masks ibv_modify_qp(3) lists
  // as required for RC. toRtr() takes a record that validateRemote() accepted.
  void toInit();
  void toRtr(const QpRecord& remote);
  void toRts();
  // RESET->INIT->RTR->RTS, validating `remote` first.
  void connect(const QpRecord& remote);
  ibv_qp_state state() const { return state_; }

  // Posts one signalled RDMA write; wr_id carries the peer rank.
  void postWrite(const void* local, std::size_t bytes, std::uint32_t lkey, std::uint64_t remoteAddr,
                 std::uint32_t rkey);

 private:
  void modify(ibv_qp_attr& attr, int mask, const char* transition, ibv_qp_state next);

  Context& context_;
  int peer_;
  ibv_qp* qp_ = nullptr;
  std::uint32_t psn_ = 0;
  ibv_qp_state state_ = IBV_QPS_RESET;
  std::uint8_t remoteMaxDestRdAtomic_ = 1;
};

class MemoryRegion {
 public:
  MemoryRegion(Context& context, void* addr, std::size_t length, int access);
  ~MemoryRegion();
  MemoryRegion(const MemoryRegion&) = delete;
  MemoryRegion& operator=(const MemoryRegion&) = delete;

  std::uint32_t lkey() const { return mr_->lkey; }
  std::uint32_t rkey() const { return mr_->rkey; }
  void* addr() const { return addr_; }
  std::size_t length() const { return length_; }
  MrRecord record() const;

 private:
  Context& context_;
  void* addr_;
  std::size_t length_;
  ibv_mr* mr_ = nullptr;
};

// Names of the mask bits, "STATE|PKEY_INDEX|PORT|ACCESS_FLAGS", for messages.
std::string describeQpAttrMask(int mask);
const char* qpStateName(ibv_qp_state state);

// The masks QueuePair uses, from ibv_modify_qp(3) for RC QPs.
constexpr int kInitMask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
constexpr int kRtrMask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                         IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
constexpr int kRtsMask =
    IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;

}  // namespace tether::rdma
