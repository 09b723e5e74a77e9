// The libibverbs functions tether calls (directly, or through verbs.h's inline
// wrappers), forwarded into libibverbs opened on first use (verbs_calls.hpp).
// Local to libtether (lib/tether.map). Without libibverbs each fails as the
// library does when it has no device (NULL or an error number, errno ENOSYS);
// RealVerbs checks loadVerbs() first.
#include "rdma/verbs_calls.hpp"

#include <infiniband/verbs.h>

#include <cerrno>

#include "base/lazy_library.hpp"

namespace tether::rdma {
namespace {

LazyLibrary& library() {
  static LazyLibrary lib({"libibverbs.so.1", std::string(TETHER_IBVERBS_LIBDIR) + "/libibverbs.so.1"});
  return lib;
}

}  // namespace

std::string loadVerbs() { return library().load() ? std::string() : library().error(); }

// The library's `name`, typed as `fn` is (its declaration in verbs.h).
template <class Fn>
Fn* resolve(Fn*, const char* name) {
  return library().function<Fn*>(name);
}

}  // namespace tether::rdma

using tether::rdma::resolve;

// Each forwarder resolves its function once; without it: errno ENOSYS, `failed`.
#define TETHER_VERBS_FORWARD(name, failed, ...)      \
  static auto* const fn = resolve(&(::name), #name); \
  if (!fn) {                                         \
    errno = ENOSYS;                                  \
    return failed;                                   \
  }                                                  \
  return fn(__VA_ARGS__)

extern "C" {

ibv_device**(ibv_get_device_list)(int* num_devices) { TETHER_VERBS_FORWARD(ibv_get_device_list, nullptr, num_devices); }
void ibv_free_device_list(ibv_device** list) {
  static auto* const fn = resolve(&ibv_free_device_list, "ibv_free_device_list");
  if (fn) fn(list);
}
const char* ibv_get_device_name(ibv_device* device) { TETHER_VERBS_FORWARD(ibv_get_device_name, nullptr, device); }
ibv_context* ibv_open_device(ibv_device* device) { TETHER_VERBS_FORWARD(ibv_open_device, nullptr, device); }
int ibv_close_device(ibv_context* context) { TETHER_VERBS_FORWARD(ibv_close_device, -1, context); }
int ibv_query_device(ibv_context* context, ibv_device_attr* attr) {
  TETHER_VERBS_FORWARD(ibv_query_device, ENOSYS, context, attr);
}
int(ibv_query_port)(ibv_context* context, uint8_t port, _compat_ibv_port_attr* attr) {
  TETHER_VERBS_FORWARD(ibv_query_port, ENOSYS, context, port, attr);
}
int _ibv_query_gid_ex(ibv_context* context, uint32_t port, uint32_t index, ibv_gid_entry* entry, uint32_t flags,
                      size_t entry_size) {
  TETHER_VERBS_FORWARD(_ibv_query_gid_ex, ENOSYS, context, port, index, entry, flags, entry_size);
}
ssize_t _ibv_query_gid_table(ibv_context* context, ibv_gid_entry* entries, size_t max_entries, uint32_t flags,
                             size_t entry_size) {
  TETHER_VERBS_FORWARD(_ibv_query_gid_table, -ENOSYS, context, entries, max_entries, flags, entry_size);
}
ibv_pd* ibv_alloc_pd(ibv_context* context) { TETHER_VERBS_FORWARD(ibv_alloc_pd, nullptr, context); }
int ibv_dealloc_pd(ibv_pd* pd) { TETHER_VERBS_FORWARD(ibv_dealloc_pd, ENOSYS, pd); }
ibv_cq* ibv_create_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel, int comp_vector) {
  TETHER_VERBS_FORWARD(ibv_create_cq, nullptr, context, cqe, cq_context, channel, comp_vector);
}
int ibv_destroy_cq(ibv_cq* cq) { TETHER_VERBS_FORWARD(ibv_destroy_cq, ENOSYS, cq); }
ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) { TETHER_VERBS_FORWARD(ibv_create_qp, nullptr, pd, attr); }
int ibv_destroy_qp(ibv_qp* qp) { TETHER_VERBS_FORWARD(ibv_destroy_qp, ENOSYS, qp); }
int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask) {
  TETHER_VERBS_FORWARD(ibv_modify_qp, ENOSYS, qp, attr, attr_mask);
}
int ibv_query_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask, ibv_qp_init_attr* init_attr) {
  TETHER_VERBS_FORWARD(ibv_query_qp, ENOSYS, qp, attr, attr_mask, init_attr);
}
ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned int access) {
  TETHER_VERBS_FORWARD(ibv_reg_mr_iova2, nullptr, pd, addr, length, iova, access);
}
int ibv_dereg_mr(ibv_mr* mr) { TETHER_VERBS_FORWARD(ibv_dereg_mr, ENOSYS, mr); }
const char* ibv_wc_status_str(ibv_wc_status status) {
  static auto* const fn = resolve(&ibv_wc_status_str, "ibv_wc_status_str");
  return fn ? fn(status) : "(libibverbs is not loaded)";
}

}  // extern "C"
