// tether/rdma/verbs.hpp — the thin seam between tether's QP bring-up and libibverbs.
//
// Every verbs call tether makes goes through this interface, so the whole
// bring-up runs against either the real library (makeRealVerbs) or the fake
// backend in tether/rdma/fake_verbs.hpp, which models devices, ports, GID
// tables and the RC QP state machine for machines without RDMA hardware.
//
// Conventions follow libibverbs so RealVerbs stays a one-line forward per call:
// int results are 0 or an errno value, pointer results are nullptr with errno
// set, pollCq returns a count or a negative value.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace tether::rdma {

class Verbs {
 public:
  virtual ~Verbs() = default;

  // "libibverbs" or "fake"; used in messages.
  virtual const char* backendName() const = 0;

  // Names of the RDMA devices present. Returns 0 or an errno value: libibverbs
  // reports ENOSYS when the kernel has no RDMA subsystem at all.
  virtual int listDevices(std::vector<std::string>& names) = 0;
  virtual ibv_context* openDevice(const std::string& name) = 0;
  virtual int closeDevice(ibv_context* context) = 0;

  virtual int queryDevice(ibv_context* context, ibv_device_attr* attr) = 0;
  virtual int queryPort(ibv_context* context, std::uint8_t port, ibv_port_attr* attr) = 0;
  // ibv_query_gid_table: the number of valid entries of all ports, or -errno.
  virtual long queryGidTable(ibv_context* context, ibv_gid_entry* entries, std::size_t maxEntries) = 0;
  // ibv_query_gid_ex: 0, ENODATA for an empty entry, or another errno value.
  virtual int queryGidEx(ibv_context* context, std::uint32_t port, std::uint32_t index, ibv_gid_entry* entry) = 0;

  virtual ibv_pd* allocPd(ibv_context* context) = 0;
  virtual int deallocPd(ibv_pd* pd) = 0;
  virtual ibv_cq* createCq(ibv_context* context, int entries) = 0;
  virtual int destroyCq(ibv_cq* cq) = 0;
  virtual ibv_qp* createQp(ibv_pd* pd, ibv_qp_init_attr* attr) = 0;
  virtual int destroyQp(ibv_qp* qp) = 0;
  virtual int modifyQp(ibv_qp* qp, ibv_qp_attr* attr, int attrMask) = 0;
  virtual int queryQp(ibv_qp* qp, ibv_qp_attr* attr, int attrMask, ibv_qp_init_attr* init) = 0;
  virtual ibv_mr* regMr(ibv_pd* pd, void* addr, std::size_t length, int access) = 0;
  virtual int deregMr(ibv_mr* mr) = 0;

  virtual int postSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** badWr) = 0;
  virtual int pollCq(ibv_cq* cq, int entries, ibv_wc* wc) = 0;
};

// The real library. Creating it never fails; listDevices() says whether there is hardware.
std::unique_ptr<Verbs> makeRealVerbs();

}  // namespace tether::rdma
