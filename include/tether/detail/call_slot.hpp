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
      std::lock_guard<std::mutex> lock(slot.mutex_);  // taking the slot and naming the call are one step
      if (slot.held_) {
        throw Error(ErrorCode::InvalidArgument,
                    "rank " + std::to_string(rank) + ": " + op + ": called while " + slot.name_ +
                        " of this communicator is in flight on this rank (another thread's call): collectives of "
                        "one communicator must be called one at a time, in the same order on every rank; give each "
                        "thread its own communicator (split())",
                    rank);
      }
      slot.held_ = true;
      slot.name_ = op;
    }
    ~Scope() {
      std::lock_guard<std::mutex> lock(slot_.mutex_);
      slot_.name_.clear();
      slot_.held_ = false;
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
  std::mutex mutex_;  // guards the two below
  bool held_ = false;
  std::string name_;  // the holder's call
};

}  // namespace detail
}  // namespace tether
