// A shared library opened on first use (dlopen) instead of at load time: what
// only some paths need (PMIx, libibverbs) stays out of libtether's NEEDED list,
// so loading libtether (or the NVSHMEM plug-in) does not load them and their
// dependencies. The forwarders that call through it (lib/rendezvous/pmix_calls.cpp,
// lib/rdma/verbs_calls.cpp) define the C functions tether calls, local to
// libtether (lib/tether.map).
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "base/layer.hpp"

TETHER_LAYER(0, "base");

namespace tether {

class LazyLibrary {
 public:
  // `names`: the sonames to try in order (a bare soname uses the loader's
  // search path; a path is opened as given).
  explicit LazyLibrary(std::vector<std::string> names) : names_(std::move(names)) {}

  // Opens the library on the first call (thread-safe); false if none of the names loads.
  bool load();
  // Why load() failed ("" when it did not).
  const std::string& error() const { return error_; }
  // `name` in the library, or nullptr (not loadable, or no such symbol).
  void* symbol(const char* name);

  // A function of the library as type Fn, or nullptr.
  template <class Fn>
  Fn function(const char* name) {
    return reinterpret_cast<Fn>(symbol(name));
  }

 private:
  std::vector<std::string> names_;
  std::once_flag once_;
  void* handle_ = nullptr;
  std::string error_;
};

}  // namespace tether
