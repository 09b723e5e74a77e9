// tether/detail/core/call_slot.hpp — one collective call at a time per
// communicator, checked (docs/design.md, "Threads"). Collectives take
// collective ids in call order, and two threads' calls on one communicator
// have no order that every rank shares, so their payloads would land in each
// other's calls. A call holds its communicator's slot from entry until it
// returns (a nonblocking call: until it has started); a call that finds the
// slot held fails at once with Error{InvalidArgument} naming both calls and
// suggesting split(). Used by every Bootstrap (TcpBootstrap and the testing
// world), so the rule and its words are the same everywhere. Header-only, C++17.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "tether/detail/wire/op.hpp"
#include "tether/error.hpp"

namespace tether {
namespace detail {

class CallSlot {
 public:
  // Holds `slot` for one call of `op` by `rank` (its communicator rank);
  // `op` is a name that outlives the call ("allgather", "split").
  class Scope {
   public:
    Scope(CallSlot& slot, int rank, const char* op) : slot_(slot) {
      // Taking the slot and naming the call are one step: the holder's op
      // is the slot's value, so a refused call reads the name of the call
      // that holds it (an uncontended call pays one compare-and-swap).
      const char* holder = nullptr;
      if (!slot.op_.compare_exchange_strong(holder, op, std::memory_order_acquire, std::memory_order_acquire)) {
        throw Error(ErrorCode::InvalidArgument,
                    "rank " + std::to_string(rank) + ": " + op + ": called while " + slot.holder(holder) +
                        " of this communicator is in flight on this rank (another thread's call): collectives of "
                        "one communicator must be called one at a time, in the same order on every rank; give each "
                        "thread its own communicator (split())",
                    rank);
      }
    }
    ~Scope() {
      slot_.id_.store(0, std::memory_order_relaxed);  // the next holder has no id until it renames
      slot_.op_.store(nullptr, std::memory_order_release);
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    CallSlot& slot_;
  };

  // The holder's call once it has its id: `op` (a name that outlives the
  // call) and `id`, on communicator `comm` (0: the world's, not named).
  // Errors quote it ("allgather#7"); the text is made only for them, so a
  // call pays for three stores.
  void rename(const char* op, std::uint64_t id, std::uint64_t comm = 0) {
    op_.store(op, std::memory_order_relaxed);
    comm_.store(comm, std::memory_order_relaxed);
    id_.store(id, std::memory_order_relaxed);
  }

 private:
  // The holder's name, `op` as the refused call read it (its id may come a
  // moment late: then the operation alone).
  std::string holder(const char* op) const {
    const std::uint64_t id = id_.load(std::memory_order_relaxed);
    const std::uint64_t comm = comm_.load(std::memory_order_relaxed);
    if (id == 0) return op;
    return coll::callName(op, id, comm);
  }

  // The holder's operation; null while the slot is free. Set by the
  // holder's thread, read by a thread refused the slot, as are id_ and comm_.
  std::atomic<const char*> op_{nullptr};
  std::atomic<std::uint64_t> id_{0};  // 0: no id yet
  std::atomic<std::uint64_t> comm_{0};
};

}  // namespace detail
}  // namespace tether
