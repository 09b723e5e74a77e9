#include "coll/select.hpp"

#include "tether/detail/coll/settings.hpp"

namespace tether::coll {
namespace {

const dc::Settings& settings() {
  static const dc::Settings s = dc::loadSettings();
  return s;
}

}  // namespace

void checkSettings() { settings(); }

dc::Shape shape(int rank, int size, bool cpuBound) {
  dc::Shape s = settings().tuning;
  s.rank = rank;
  s.size = size;
  s.cpuBound = cpuBound;
  return s;
}

const dc::Algorithm& choose(const dc::Shape& shape, const dc::Call& call) {
  return *dc::choose(shape, call, settings().forcedFor(call.op));
}

}  // namespace tether::coll
