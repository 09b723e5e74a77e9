// tether/detail/call_slot.hpp — one collective call at a time per
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
#include <mutex>
#include <string>

#include "tether/error.hpp"

namespace tether {
namespace detail {

class CallSlot {
 public:
  // Holds `slot` for one call of `op` by `rank` (its communicator rank).
  class Scope {
   public:
    Scope(CallSlot& slot, int rank, const std::string& op) : slot_(slot) {
      if (slot.held_.exchange(true, std::memory_order_acq_rel)) {
        std::string other = slot.name();
        throw Error(ErrorCode::InvalidArgument,
                    "rank " + std::to_string(rank) + ": " + op + ": called while " +
                        (other.empty() ? std::string("another collective") : other) +
                        " of this communicator is in flight on this rank (another thread's call): collectives of "
                        "one communicator must be called one at a time, in the same order on every rank; give each "
                        "thread its own communicator (split())",
                    rank);
      }
      slot.rename(op);
    }
    ~Scope() {
      slot_.rename("");
      slot_.held_.store(false, std::memory_order_release);
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    CallSlot& slot_;
  };

  // The holder's name, once it has its id ("allgather#7"); errors quote it.
  void rename(const std::string& name) {
    std::lock_guard<std::mutex> lock(mutex_);
    name_ = name;
  }

 private:
  std::string name() {
    std::lock_guard<std::mutex> lock(mutex_);
    return name_;
  }

  std::atomic<bool> held_{false};
  std::mutex mutex_;  // guards name_
  std::string name_;
};

}  // namespace detail
}  // namespace tether
