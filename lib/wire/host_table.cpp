#include "wire/host_table.hpp"

#include <stdexcept>
#include <string>

#include "base/bytes.hpp"

namespace tether::wire {

Bytes encodeLeaderTable(std::uint32_t radix, const std::vector<std::uint32_t>& leaders, const Bytes& table) {
  Bytes b;
  b.reserve(8 + 4 * leaders.size() + table.size());
  ByteWriter w(b);
  w.u32(radix);
  w.u32(static_cast<std::uint32_t>(leaders.size()));
  for (std::uint32_t l : leaders) w.u32(l);
  w.bytes(table.data(), table.size());
  return b;
}

LeaderTable decodeLeaderTable(const Bytes& b, std::uint32_t nranks) {
  ByteReader r(b.data(), b.size());
  LeaderTable t;
  t.radix = r.u32();
  if (t.radix < 2) throw std::invalid_argument("leader table: tree radix " + std::to_string(t.radix) + " (at least 2)");
  const std::uint32_t count = r.u32();
  if (count >= nranks || r.remaining() / 4 < count)
    throw std::invalid_argument("leader table lists " + std::to_string(count) + " leaders in " +
                                std::to_string(r.remaining()) + " bytes, of a world of " + std::to_string(nranks));
  t.leaders.reserve(count);
  for (std::uint32_t i = 0; i < count; ++i) {
    const std::uint32_t l = r.u32();
    if (l == 0 || l >= nranks || (!t.leaders.empty() && l <= t.leaders.back()))
      throw std::invalid_argument("leader table: leader " + std::to_string(i) + " is rank " + std::to_string(l) +
                                  " (leaders must be ascending ranks in 1.." + std::to_string(nranks - 1) + ")");
    t.leaders.push_back(l);
  }
  const std::size_t at = b.size() - r.remaining();
  t.table = std::make_shared<const Bytes>(b.begin() + static_cast<std::ptrdiff_t>(at), b.end());
  (void)AddressTable(t.table, nranks);  // checks the count and every entry
  return t;
}

}  // namespace tether::wire
