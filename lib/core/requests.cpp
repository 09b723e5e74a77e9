// Nonblocking calls: a request is an operation started on the world (Calls::
// start) that the caller tests, waits for or cancels later. The semantics are
// in include/tether/request.hpp.

#include "base/env.hpp"
#include "core/communicator.hpp"
#include "core/request_impl.hpp"
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

class OpRequest final : public Request::Impl {
 public:
  static void* operator new(std::size_t bytes) { return RequestMemory::take(bytes); }
  static void operator delete(void* p, std::size_t bytes) { RequestMemory::give(p, bytes); }

  // It ends by `deadline` (the op's, RequestDeadlines), as a blocking call
  // does, whether it is waited for, tested or left alone meanwhile.
  OpRequest(std::shared_ptr<Communicator> comm, std::shared_ptr<Op> op, std::shared_ptr<Completion> done,
            std::vector<unsigned char> keep, Op::Clock::time_point deadline)
      : comm_(std::move(comm)),
        op_(std::move(op)),
        done_(std::move(done)),
        keep_(std::move(keep)),
        deadline_(deadline) {}

  // Not done: cancel it and wait for its end, so that no buffer of the
  // caller's is used after this returns. Errors are dropped (nobody asked).
  ~OpRequest() override {
    if (done_->isDone() || comm_->world().forked()) return;  // a forked child's copy is inert
    comm_->world().calls().cancel(op_);
    // A send or a matched receive is not withdrawn: it still ends by its deadline.
    try {
      comm_->world().calls().wait(op_, *done_, detail::core::deadlineAfter(comm_->timeout()));
    } catch (...) {
    }
  }

  bool test() override {
    comm_->world().calls().checkProcess(*op_);
    if (!comm_->world().calls().poll(*done_, deadline_)) return false;
    finish();
    return true;
  }

  void wait(std::chrono::milliseconds timeout) override {
    const auto until = detail::core::waitDeadline(
        comm_->rank(), [&] { return op_->name(); }, timeout, comm_->timeout());
    comm_->world().calls().checkProcess(*op_);
    if (!done_->isDone()) {
      try {
        comm_->world().calls().wait(op_, *done_, until);
      } catch (...) {
      }
    }
    finish();
  }

  bool cancel() override {
    if (done_->isDone()) return false;
    return comm_->world().calls().cancel(op_);
  }

 private:
  // Done: rethrows the operation's error (a failed collective left its
  // communicator unusable when it failed: Calls::endOp).
  void finish() { done_->rethrowIfFailed(); }

  std::shared_ptr<Communicator> comm_;
  std::shared_ptr<Op> op_;
  std::shared_ptr<Completion> done_;
  std::vector<unsigned char> keep_;
  World::Clock::time_point deadline_;  // the communicator's timeout from the start
};

}  // namespace

std::unique_ptr<Request::Impl> makeRequest(std::shared_ptr<Communicator> comm, std::shared_ptr<Op> op,
                                           std::shared_ptr<Completion> done, std::vector<unsigned char> keep,
                                           Op::Clock::time_point deadline) {
  return std::make_unique<OpRequest>(std::move(comm), std::move(op), std::move(done), std::move(keep), deadline);
}

}  // namespace tether
