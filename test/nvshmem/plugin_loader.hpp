// plugin_loader.hpp — loads nvshmem_bootstrap_tether.so.3 the way NVSHMEM's
// loader does: dlopen, then dlsym of the pre-init and init entry points, in
// that order; tether's two optional extensions are looked up after them.
#pragma once

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "nvshmem_bootstrap.h"

namespace tether::test {

class NvshmemPlugin {
 public:
  using PreInit = int (*)(bootstrap_handle_t*, int);
  using Init = int (*)(void*, bootstrap_handle_t*, int);
  using SetOptions = int (*)(const tether_options_t*);
  using LastError = const char* (*)();

  // The plug-in the build made (the test's environment names it).
  static std::string path() {
    const char* p = std::getenv("TETHER_NVSHMEM_PLUGIN");
    if (!p) throw std::runtime_error("TETHER_NVSHMEM_PLUGIN is not set (meson test sets it)");
    return p;
  }

  explicit NvshmemPlugin(const std::string& file = path()) {
    lib_ = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib_) throw std::runtime_error(std::string("dlopen: ") + ::dlerror());
    preInit = symbol<PreInit>("nvshmemi_bootstrap_plugin_pre_init");
    init = symbol<Init>("nvshmemi_bootstrap_plugin_init");
    setOptions = symbol<SetOptions>("tether_nvshmem_set_options");
    lastError = symbol<LastError>("tether_nvshmem_last_error");
  }
  ~NvshmemPlugin() { ::dlclose(lib_); }
  NvshmemPlugin(const NvshmemPlugin&) = delete;
  NvshmemPlugin& operator=(const NvshmemPlugin&) = delete;

  PreInit preInit = nullptr;
  Init init = nullptr;
  SetOptions setOptions = nullptr;
  LastError lastError = nullptr;

 private:
  template <class Fn>
  Fn symbol(const char* name) {
    void* p = ::dlsym(lib_, name);
    if (!p) throw std::runtime_error(std::string("dlsym ") + name + ": " + ::dlerror());
    return reinterpret_cast<Fn>(p);
  }
  void* lib_ = nullptr;
};

// A fresh NVSHMEM unique id: its version set, the rest for the plug-in.
struct NvshmemUid {
  unsigned char bytes[TETHER_NVSHMEM_UID_BYTES] = {};
  NvshmemUid() {
    int version = TETHER_NVSHMEM_UID_VERSION;
    static_assert(sizeof version == 4, "NVSHMEM's uid version is a 4-byte int");
    std::memcpy(bytes, &version, sizeof version);
  }
};

inline bootstrap_uid_args_t uidArgs(NvshmemUid& uid, int rank, int nranks) {
  return bootstrap_uid_args_t{(1 << 16) + static_cast<int>(sizeof(bootstrap_uid_args_t)), uid.bytes, rank, nranks};
}

}  // namespace tether::test
