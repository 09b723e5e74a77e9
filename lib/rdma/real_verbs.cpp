// Verbs over libibverbs: one forward per call.
#include <cerrno>
#include <memory>
#include <string>

#include "rdma/verbs_calls.hpp"
#include "tether/rdma/verbs.hpp"

namespace tether::rdma {
namespace {

class RealVerbs final : public Verbs {
 public:
  // libibverbs is opened here, on first use (verbs_calls.hpp).
  RealVerbs() : name_(loadVerbs().empty() ? "libibverbs" : "libibverbs, " + loadVerbs()) {}

  const char* backendName() const override { return name_.c_str(); }

  int listDevices(std::vector<std::string>& names) override {
    names.clear();
    if (!loadVerbs().empty()) return ENOSYS;
    errno = 0;
    int count = 0;
    ibv_device** list = ibv_get_device_list(&count);
    if (list == nullptr) return errno != 0 ? errno : ENODEV;
    for (int i = 0; i < count; ++i) names.emplace_back(ibv_get_device_name(list[i]));
    ibv_free_device_list(list);
    return 0;
  }

  ibv_context* openDevice(const std::string& name) override {
    int count = 0;
    ibv_device** list = ibv_get_device_list(&count);
    if (list == nullptr) return nullptr;
    ibv_context* context = nullptr;
    errno = ENODEV;
    for (int i = 0; i < count; ++i) {
      if (name == ibv_get_device_name(list[i])) {
        context = ibv_open_device(list[i]);  // stays valid after the list is freed
        break;
      }
    }
    const int saved = errno;
    ibv_free_device_list(list);
    errno = saved;
    return context;
  }

  int closeDevice(ibv_context* context) override { return ibv_close_device(context) == 0 ? 0 : errno; }
  int queryDevice(ibv_context* context, ibv_device_attr* attr) override { return ibv_query_device(context, attr); }
  int queryPort(ibv_context* context, std::uint8_t port, ibv_port_attr* attr) override {
    return ibv_query_port(context, port, attr);
  }
  long queryGidTable(ibv_context* context, ibv_gid_entry* entries, std::size_t maxEntries) override {
    // Already a count or a negative errno value (ibv_query_gid_table(3)).
    return static_cast<long>(ibv_query_gid_table(context, entries, maxEntries, 0));
  }
  int queryGidEx(ibv_context* context, std::uint32_t port, std::uint32_t index, ibv_gid_entry* entry) override {
    const int rc = ibv_query_gid_ex(context, port, index, entry, 0);
    return rc == 0 ? 0 : (rc > 0 ? rc : errno);
  }
  ibv_pd* allocPd(ibv_context* context) override { return ibv_alloc_pd(context); }
  int deallocPd(ibv_pd* pd) override { return ibv_dealloc_pd(pd); }
  ibv_cq* createCq(ibv_context* context, int entries) override {
    return ibv_create_cq(context, entries, nullptr, nullptr, 0);
  }
  int destroyCq(ibv_cq* cq) override { return ibv_destroy_cq(cq); }
  ibv_qp* createQp(ibv_pd* pd, ibv_qp_init_attr* attr) override { return ibv_create_qp(pd, attr); }
  int destroyQp(ibv_qp* qp) override { return ibv_destroy_qp(qp); }
  int modifyQp(ibv_qp* qp, ibv_qp_attr* attr, int attrMask) override { return ibv_modify_qp(qp, attr, attrMask); }
  int queryQp(ibv_qp* qp, ibv_qp_attr* attr, int attrMask, ibv_qp_init_attr* init) override {
    return ibv_query_qp(qp, attr, attrMask, init);
  }
  ibv_mr* regMr(ibv_pd* pd, void* addr, std::size_t length, int access) override {
    return ibv_reg_mr(pd, addr, length, access);
  }
  int deregMr(ibv_mr* mr) override { return ibv_dereg_mr(mr); }
  int postSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** badWr) override { return ibv_post_send(qp, wr, badWr); }
  int pollCq(ibv_cq* cq, int entries, ibv_wc* wc) override { return ibv_poll_cq(cq, entries, wc); }

 private:
  std::string name_;
};

}  // namespace

std::unique_ptr<Verbs> makeRealVerbs() { return std::make_unique<RealVerbs>(); }

}  // namespace tether::rdma
