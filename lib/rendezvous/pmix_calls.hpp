// libpmix, opened on the first PMIx call (lib/base/lazy_library.hpp): tether
// does not link it, so loading libtether does not load PMIx and what it pulls
// in (libevent, hwloc, munge, ...). pmix_calls.cpp defines the PMIx_*
// functions tether calls as forwarders into it.
#pragma once

#include <string>

#include "base/layer.hpp"

TETHER_LAYER(4, "rendezvous");

namespace tether::rdv {

// Opens libpmix if it is not open yet; "" when it is, else why not
// ("cannot load libpmix.so.2 (...)").
std::string loadPmix();

}  // namespace tether::rdv
