// One blocking call in flight: what it waits for and how it ends. Lives on the
// progress thread; the calling thread only holds a reference for cancellation.
#pragma once

#include <boost/asio/any_completion_handler.hpp>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "match/key.hpp"

namespace tether {

class Op {
 public:
  using Waiter = boost::asio::any_completion_handler<void(std::exception_ptr)>;

  enum class Kind { Collective, Send, Recv };

  // A collective: `code` is its wire::OpCode, `coll` its collective id.
  Op(std::uint64_t comm, std::uint64_t coll, std::uint32_t code)
      : comm(comm), coll(coll), code(code), kind_(Kind::Collective) {}
  // Point-to-point: `peer` and `tag` as the caller gave them.
  Op(Kind kind, std::uint64_t comm, int peer, int tag)
      : comm(comm), coll(0), code(0), kind_(kind), peer_(peer), tag_(tag) {}

  // "allgather#12", "recv from rank 3 tag 7": how errors name the operation.
  // Built on demand (only errors and logs need it), not on every call.
  std::string name() const;

  const std::uint64_t comm;
  const std::uint64_t coll; // 0 for point-to-point
  const std::uint32_t code; // wire::OpCode of a collective, 0 for point-to-point

  // Progress-thread state.
  int outstanding = 0;                 // receives posted + referenced sends unwritten
  std::exception_ptr error;            // first failure; ends the operation
  std::optional<Waiter> waiter;        // the coroutine waiting in settle()
  std::vector<match::Key> posted;      // receives still in the mailbox
  bool active = false;                 // registered with the world
  // A collective's group as world ranks (empty for point-to-point): losing any
  // of them fails the collective even when it is not waiting on that rank
  // right now, because the collective can no longer complete everywhere.
  std::vector<int> members;
  // A failed op whose frame a link is writing from (or reading into) its
  // buffer right now: the call returns only once that transfer ends, so the
  // link need not cut the stream mid-frame (which the peer would take for
  // this rank's death) and the caller's buffer is never used after return.
  int draining = 0;
  std::function<void()> afterDrain;

 private:
  const Kind kind_;
  const int peer_ = -1, tag_ = -1;
};

}  // namespace tether
