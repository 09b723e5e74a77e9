// Replays a plan over the TCP world's transport (the executor is
// tether/detail/coll/execute.hpp, shared with the testing world).
#include <utility>

#include "coll/transport.hpp"
#include "tether/detail/coll/execute.hpp"

namespace tether::coll {

boost::asio::awaitable<void> execute(Transport& t, Plan plan, const unsigned char* in, unsigned char* out) {
  detail::coll::Execution run(std::move(plan), in, out);
  while (run.next(t)) co_await t.settle();
}

}  // namespace tether::coll
