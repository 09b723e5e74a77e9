// libFuzzer target: UniqueId parsing, from the text users pass through
// environment variables and files, and from raw bytes. Bad input must end in
// tether::Error{InvalidArgument}; a valid id must survive the text round trip
// and decode its root address.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/unique_id_layout.hpp"
#include "tether/error.hpp"
#include "tether/unique_id.hpp"

using namespace tether;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    auto id = UniqueId::fromString(std::string(reinterpret_cast<const char*>(data), size));
    if (UniqueId::fromString(id.toString()) != id) std::abort();
    (void)id.rootHost();
    (void)id.rootPort();
  } catch (const Error& e) {
    if (e.code() != ErrorCode::InvalidArgument) std::abort();
  }
  if (size >= UniqueId::kBytes) {
    UniqueId raw;
    std::memcpy(raw.bytes.data(), data, UniqueId::kBytes);
    try {
      // Reserved bytes are covered by the checksum but carry no field, so
      // compare what the fields re-encode to, not the raw bytes.
      auto f = uid::parse(raw);
      if (f.root.family != 4 && f.root.family != 6) std::abort();
      if (f.root.port == 0) std::abort();
      auto canonical = uid::make(f);
      if (uid::make(uid::parse(canonical)) != canonical) std::abort();
      if (UniqueId::fromString(raw.toString()) != raw) std::abort();
    } catch (const Error& e) {
      if (e.code() != ErrorCode::InvalidArgument) std::abort();
    }
  }
  return 0;
}
