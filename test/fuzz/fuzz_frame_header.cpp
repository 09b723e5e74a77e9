// libFuzzer target: the 48-byte frame header every link parses first, under
// the data and the control limits. A header that decodes must describe itself
// and re-encode to the same bytes; one that does not must say why.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "wire/frame.hpp"

using namespace tether::wire;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < kHeaderBytes) return 0;
  for (std::uint64_t limit : {kMaxControlPayload, std::uint64_t(1) << 30}) {
    std::string why;
    auto h = decodeHeader(data, limit, &why);
    if (!h) {
      if (why.empty()) std::abort();  // every refusal names its reason
      continue;
    }
    if (h->length > limit) std::abort();
    (void)describe(*h);
    HeaderBytes again = encodeHeader(*h);
    if (std::memcmp(again.data(), data, kHeaderBytes) != 0) std::abort();
  }
  return 0;
}
