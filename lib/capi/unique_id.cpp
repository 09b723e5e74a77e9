// C ABI: unique ids (create, derive, forget, to and from text).
#include <cstring>
#include <string>

#include "capi/guard.hpp"
#include "tether/tcp_bootstrap.hpp"
#include "tether/tether.h"

static_assert(TETHER_UNIQUE_ID_BYTES == tether::UniqueId::kBytes, "the C and C++ unique ids have the same size");
static_assert(TETHER_UNIQUE_ID_STRING_BYTES == 2 * tether::UniqueId::kBytes + 1, "hex text and a NUL");

namespace {

using namespace tether::capi;

void toC(const tether::UniqueId& from, tether_unique_id_t* to) {
  std::memcpy(to->bytes, from.bytes.data(), sizeof to->bytes);
}

tether::UniqueId fromC(const tether_unique_id_t* from) {
  tether::UniqueId id;
  std::memcpy(id.bytes.data(), from->bytes, id.bytes.size());
  return id;
}

}  // namespace

extern "C" {

tether_result_t tether_unique_id_create(tether_unique_id_t* id) {
  return guarded("tether_unique_id_create", [&] {
    require(id, "tether_unique_id_create", "id");
    toC(tether::TcpBootstrap::createUniqueId(), id);
  });
}

tether_result_t tether_unique_id_create_at(const char* root_host_port, tether_unique_id_t* id) {
  return guarded("tether_unique_id_create_at", [&] {
    require(root_host_port, "tether_unique_id_create_at", "root_host_port");
    require(id, "tether_unique_id_create_at", "id");
    toC(tether::TcpBootstrap::createUniqueId(root_host_port), id);
  });
}

tether_result_t tether_unique_id_from_root(const char* root_host_port, tether_unique_id_t* id) {
  return guarded("tether_unique_id_from_root", [&] {
    require(root_host_port, "tether_unique_id_from_root", "root_host_port");
    require(id, "tether_unique_id_from_root", "id");
    toC(tether::TcpBootstrap::uniqueIdFromRoot(root_host_port), id);
  });
}

tether_result_t tether_unique_id_forget(const tether_unique_id_t* id) {
  return guarded("tether_unique_id_forget",
                 [&] { tether::TcpBootstrap::forgetUniqueId(fromC(require(id, "tether_unique_id_forget", "id"))); });
}

tether_result_t tether_unique_id_to_string(const tether_unique_id_t* id, char* buf, size_t buf_size) {
  return guarded("tether_unique_id_to_string", [&] {
    require(id, "tether_unique_id_to_string", "id");
    require(buf, "tether_unique_id_to_string", "buf");
    if (buf_size < TETHER_UNIQUE_ID_STRING_BYTES)
      invalid("tether_unique_id_to_string: buf_size " + std::to_string(buf_size) + " is less than " +
              std::to_string(TETHER_UNIQUE_ID_STRING_BYTES));
    auto text = fromC(id).toString();
    std::memcpy(buf, text.c_str(), text.size() + 1);
  });
}

tether_result_t tether_unique_id_from_string(const char* text, tether_unique_id_t* id) {
  return guarded("tether_unique_id_from_string", [&] {
    require(text, "tether_unique_id_from_string", "text");
    require(id, "tether_unique_id_from_string", "id");
    toC(tether::UniqueId::fromString(text), id);
  });
}

}  // extern "C"
