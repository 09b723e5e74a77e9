#include <memory>

#include "coll/transport.hpp"

namespace tether::coll {

boost::asio::awaitable<void> execute(Transport& t, Plan plan, const unsigned char* in, unsigned char* out) {
  using Kind = detail::coll::Step::Kind;
  // Not zeroed: a plan reads only scratch it has written.
  const std::unique_ptr<unsigned char[]> scratch(new unsigned char[plan.scratchBytes()]);
  const detail::coll::Memory mem{in, out, scratch.get()};
  for (const auto& s : plan.steps()) {
    switch (s.kind) {
      case Kind::Send:
        t.postSend(s.peer, s.step, mem.at(s.at), s.bytes);
        break;
      case Kind::Recv:
        t.postRecv(s.peer, s.step, mem.at(s.at), s.bytes);
        break;
      case Kind::Copy:
      case Kind::CopyBlocks:
        mem.copy(s);
        break;
      case Kind::Settle:
        co_await t.settle();
        break;
    }
  }
}

}  // namespace tether::coll
