// tether::toString(ErrorCode) is inline in tether/error.hpp (header-only users
// need no library symbol); libtether keeps exporting one copy (lib/tether.map)
// for programs built against 0.1.0, which called the library's.
#include "tether/error.hpp"

namespace tether {
namespace {
[[maybe_unused]] __attribute__((used)) const char* (*const kExportToString)(ErrorCode) noexcept = &toString;
}  // namespace
}  // namespace tether
