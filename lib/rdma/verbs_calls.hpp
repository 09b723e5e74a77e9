// libibverbs, opened on the first verbs call (lib/base/lazy_library.hpp):
// tether does not link it, so loading libtether does not load it (and
// libnl, libudev). verbs_calls.cpp defines the ibv_* functions tether calls
// as forwarders into it.
#pragma once

#include <string>

#include "base/layer.hpp"

TETHER_LAYER(7, "rdma");

namespace tether::rdma {

// Opens libibverbs if it is not open yet; "" when it is, else why not
// ("cannot load libibverbs.so.1 (...)").
std::string loadVerbs();

}  // namespace tether::rdma
