// What a collective needs from the world that runs it: post a send, post a
// receive, settle. The TCP world implements it per call (lib/core); execute()
// replays an algorithm's Plan (tether/detail/coll/plan.hpp) over it.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <cstddef>
#include <cstdint>

#include "base/layer.hpp"
#include "tether/detail/coll/plan.hpp"

TETHER_LAYER(5, "coll");

namespace tether::coll {

using detail::coll::Plan;

class Transport {
 public:
  // Peers are ranks of the call's communicator. `data` stays valid until the
  // next settle() returns (large payloads are not copied).
  virtual void postSend(int peer, std::uint32_t step, const void* data, std::size_t bytes) = 0;
  virtual void postRecv(int peer, std::uint32_t step, void* data, std::size_t bytes) = 0;
  // Waits for everything posted since the last settle; throws the call's error.
  virtual boost::asio::awaitable<void> settle() = 0;

 protected:
  ~Transport() = default;
};

// Runs `plan` over `t`: the caller's send buffer `in` (may equal `out`) and
// receive buffer `out`; scratch memory is allocated here.
boost::asio::awaitable<void> execute(Transport& t, Plan plan, const unsigned char* in, unsigned char* out);

}  // namespace tether::coll
