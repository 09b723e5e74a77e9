#include "base/lazy_library.hpp"

#include <dlfcn.h>

namespace tether {

bool LazyLibrary::load() {
  std::call_once(once_, [this] {
    std::string tried;
    for (const auto& name : names_) {
      // RTLD_GLOBAL: as if linked, for libraries whose own plug-ins (PMIx's
      // components, verbs providers) look symbols up in the global scope.
      handle_ = ::dlopen(name.c_str(), RTLD_NOW | RTLD_GLOBAL);
      if (handle_) return;
      const char* why = ::dlerror();
      tried += (tried.empty() ? "" : "; ") + std::string(why ? why : name + ": cannot open");
    }
    error_ = "cannot load " + (names_.empty() ? std::string("(no name)") : names_.front()) + " (" + tried + ")";
  });
  return handle_ != nullptr;
}

void* LazyLibrary::symbol(const char* name) { return load() ? ::dlsym(handle_, name) : nullptr; }

}  // namespace tether
