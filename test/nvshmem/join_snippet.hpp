#include <dlfcn.h>

#include <cstring>

#include "nvshmem_bootstrap.h"

// What NVSHMEM 3.x does with the plug-in in unique-id mode: pre-init, the id
// from rank 0 (`shareUid` hands its 128 bytes to every rank: MPI_Bcast, a
// file, a key-value store), init. Returns 0 or the plug-in's error.
template <class ShareUid>
int joinWithPlugin(const char* path, bootstrap_handle_t* handle, int rank, int nranks, ShareUid shareUid) {
  void* plugin = dlopen(path, RTLD_NOW | RTLD_LOCAL);  // stays loaded, as NVSHMEM keeps it
  if (!plugin) return -1;
  auto preInit =
      reinterpret_cast<int (*)(bootstrap_handle_t*, int)>(dlsym(plugin, "nvshmemi_bootstrap_plugin_pre_init"));
  auto init =
      reinterpret_cast<int (*)(void*, bootstrap_handle_t*, int)>(dlsym(plugin, "nvshmemi_bootstrap_plugin_init"));
  if (!preInit || !init) return -1;
  const int abi = 30000;  // 3.0.0
  int rc = preInit(handle, abi);
  if (rc != 0) return rc;
  unsigned char uid[128] = {};
  const int uidVersion = (1 << 16) + 128;
  std::memcpy(uid, &uidVersion, sizeof uidVersion);
  if (rank == 0 && (rc = handle->pre_init_ops->get_unique_id(uid)) != 0) return rc;
  shareUid(uid);
  bootstrap_uid_args_t args{(1 << 16) + 24, uid, rank, nranks};
  return init(&args, handle, abi);
}
