// The PMIx functions tether calls, forwarded into libpmix opened on first use
// (pmix_calls.hpp). Local to libtether (lib/tether.map); without libpmix each
// returns PMIX_ERR_NOT_SUPPORTED, and callers check loadPmix() first.
#include "rendezvous/pmix_calls.hpp"

#include <pmix.h>

#include "base/lazy_library.hpp"

namespace tether::rdv {
namespace {

LazyLibrary& library() {
  static LazyLibrary lib({"libpmix.so.2", std::string(TETHER_PMIX_LIBDIR) + "/libpmix.so.2", "libpmix.so"});
  return lib;
}

// The library's `name`, typed as `fn` is (its declaration in pmix.h).
template <class Fn>
Fn* resolve(Fn*, const char* name) {
  return library().function<Fn*>(name);
}

}  // namespace

std::string loadPmix() { return library().load() ? std::string() : library().error(); }

}  // namespace tether::rdv

using tether::rdv::resolve;

// Each forwarder resolves its function once; a missing one is PMIX_ERR_NOT_SUPPORTED.
#define TETHER_PMIX_FORWARD(name, ...)             \
  static auto* const fn = resolve(&::name, #name); \
  if (!fn) return PMIX_ERR_NOT_SUPPORTED;          \
  return fn(__VA_ARGS__)

extern "C" {

pmix_status_t PMIx_Init(pmix_proc_t* proc, pmix_info_t info[], size_t ninfo) {
  TETHER_PMIX_FORWARD(PMIx_Init, proc, info, ninfo);
}
pmix_status_t PMIx_Finalize(const pmix_info_t info[], size_t ninfo) { TETHER_PMIX_FORWARD(PMIx_Finalize, info, ninfo); }
pmix_status_t PMIx_Get(const pmix_proc_t* proc, const char key[], const pmix_info_t info[], size_t ninfo,
                       pmix_value_t** val) {
  TETHER_PMIX_FORWARD(PMIx_Get, proc, key, info, ninfo, val);
}
pmix_status_t PMIx_Put(pmix_scope_t scope, const char key[], pmix_value_t* val) {
  TETHER_PMIX_FORWARD(PMIx_Put, scope, key, val);
}
pmix_status_t PMIx_Commit(void) { TETHER_PMIX_FORWARD(PMIx_Commit); }
pmix_status_t PMIx_Fence(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[], size_t ninfo) {
  TETHER_PMIX_FORWARD(PMIx_Fence, procs, nprocs, info, ninfo);
}
pmix_status_t PMIx_Info_load(pmix_info_t* info, const char* key, const void* data, pmix_data_type_t type) {
  TETHER_PMIX_FORWARD(PMIx_Info_load, info, key, data, type);
}

const char* PMIx_Error_string(pmix_status_t status) {
  static auto* const fn = resolve(&::PMIx_Error_string, "PMIx_Error_string");
  return fn ? fn(status) : "libpmix is not loaded";
}
void PMIx_Value_destruct(pmix_value_t* val) {
  static auto* const fn = resolve(&::PMIx_Value_destruct, "PMIx_Value_destruct");
  if (fn) fn(val);
}

}  // extern "C"
