// Nonblocking calls: a request is an operation started on the world (Calls::
// start) that the caller tests, waits for or cancels later. The semantics are
// in include/tether/request.hpp.

#include "base/env.hpp"
#include "core/communicator.hpp"
#include "core/request_impl.hpp"
#include "tether/detail/core/call_request.hpp"
#include "tether/detail/core/deadlines.hpp"

namespace tether {
namespace {

// Requests are made and dropped call after call: a thread keeps the memory
// of the last few it dropped for the next it makes (no lock, so a forked
// child's copy is consistent), and gives it back to the heap when it exits.
class RequestMemory {
 public:
  static void* take(std::size_t bytes) {
    RequestMemory& m = mine();
    if (bytes == m.size_ && m.count_ > 0) return m.blocks_[--m.count_];
    return ::operator new(bytes);
  }
  static void give(void* p, std::size_t bytes) {
    RequestMemory& m = mine();
    if (m.alive_ && m.count_ < kKept && (m.size_ == 0 || m.size_ == bytes)) {
      m.size_ = bytes;
      m.blocks_[m.count_++] = p;
      return;
    }
    ::operator delete(p);
  }
  ~RequestMemory() {
    alive_ = false;
    while (count_ > 0) ::operator delete(blocks_[--count_]);
  }

 private:
  static RequestMemory& mine() {
    thread_local RequestMemory m;
    return m;
  }
  static constexpr int kKept = 16;
  void* blocks_[kKept] = {};
  int count_ = 0;
  std::size_t size_ = 0;  // the one size kept (OpRequest's)
  bool alive_ = true;
};

// A request's handle on its op (the shared CallRequest's,
// tether/detail/core/call_request.hpp). It ends by `deadline` (the op's,
// RequestDeadlines), as a blocking call does, whether it is waited for,
// tested or left alone meanwhile.
struct OpHandle {
  std::shared_ptr<Communicator> comm;
  std::shared_ptr<Op> op;
  std::shared_ptr<Completion> completion;
  std::vector<unsigned char> keep;    // memory the op reads until it ends
  World::Clock::time_point deadline;  // the communicator's timeout from the start

  Calls& calls() const { return comm->world().calls(); }
  bool done() const { return completion->isDone(); }
  bool poll() {
    calls().checkProcess(*op);
    return calls().poll(*completion, deadline);
  }
  void waitUntil(World::Clock::time_point until) {
    calls().checkProcess(*op);
    try {
      calls().wait(op, *completion, until);
    } catch (...) {  // its error is the op's (rethrow)
    }
  }
  // A failed collective left its communicator unusable when it failed (Calls::endOp).
  void rethrow() const {
    calls().checkProcess(*op);
    completion->rethrowIfFailed();
  }
  bool cancel() { return calls().cancel(op); }
  // A send or a matched receive is not withdrawn: it still ends by its
  // deadline. A forked child's copy is inert: dropped, it does nothing.
  void drop() {
    if (comm->world().forked()) return;
    calls().cancel(op);
    calls().wait(op, *completion, detail::core::deadlineAfter(comm->timeout()));
  }
  std::string name() const { return op->name(); }
  int rank() const { return comm->rank(); }
  std::chrono::milliseconds timeout() const { return comm->timeout(); }
};

class OpRequest final : public detail::core::CallRequest<OpHandle> {
 public:
  using CallRequest::CallRequest;
  static void* operator new(std::size_t bytes) { return RequestMemory::take(bytes); }
  static void operator delete(void* p, std::size_t bytes) { RequestMemory::give(p, bytes); }
};

}  // namespace

std::unique_ptr<Request::Impl> makeRequest(std::shared_ptr<Communicator> comm, std::shared_ptr<Op> op,
                                           std::shared_ptr<Completion> done, std::vector<unsigned char> keep,
                                           Op::Clock::time_point deadline) {
  return std::make_unique<OpRequest>(
      OpHandle{std::move(comm), std::move(op), std::move(done), std::move(keep), deadline});
}

}  // namespace tether
