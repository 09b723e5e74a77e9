#include <cstring>
#include <vector>

#include "coll/transport.hpp"

namespace tether::coll {

boost::asio::awaitable<void> execute(Transport& t, Plan plan, const unsigned char* in, unsigned char* out) {
  using Kind = detail::coll::Step::Kind;
  std::vector<unsigned char> scratch(plan.scratchBytes());
  const detail::coll::Memory mem{in, out, scratch.data()};
  for (const auto& s : plan.steps()) {
    switch (s.kind) {
      case Kind::Send: t.postSend(s.peer, s.step, mem.at(s.at), s.bytes); break;
      case Kind::Recv: t.postRecv(s.peer, s.step, mem.at(s.at), s.bytes); break;
      case Kind::Copy: std::memmove(mem.at(s.at), mem.at(s.from), s.bytes); break;
      case Kind::Settle: co_await t.settle(); break;
    }
  }
}

}  // namespace tether::coll
