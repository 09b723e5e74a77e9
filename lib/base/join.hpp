// joined(items, ", "): each item formatted with "{}", separated by `sep` — what
// fmt::join prints. fmt::join parses the items' format specs at run time, and
// GCC 12 at -O3 misreports that parser (fmt 9's fill_t) as -Wstringop-overflow,
// which breaks -Dwerror=true release builds of runtimes embedding tether.
#pragma once

#include <fmt/format.h>

#include <iterator>
#include <string>
#include <string_view>

#include "base/layer.hpp"

TETHER_LAYER(0, "base");

namespace tether {

template <class Range>
std::string joined(const Range& items, std::string_view sep) {
  std::string out;
  bool first = true;
  for (const auto& item : items) {
    if (!first) out.append(sep);
    first = false;
    fmt::format_to(std::back_inserter(out), "{}", item);
  }
  return out;
}

}  // namespace tether
