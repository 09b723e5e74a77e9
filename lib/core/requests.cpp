// Nonblocking calls: a request is an operation started on the world (Calls::
// start) that the caller tests, waits for or cancels later. The semantics are
// in include/tether/request.hpp.

#include "base/env.hpp"
#include "core/communicator.hpp"
#include "core/request_impl.hpp"
#include "tether/detail/core/deadlines.hpp"

namespace tether {
namespace {

class OpRequest final : public Request::Impl {
 public:
  OpRequest(std::shared_ptr<Communicator> comm, std::shared_ptr<Op> op, std::shared_ptr<Completion> done,
            std::vector<unsigned char> keep)
      : comm_(std::move(comm)),
        op_(std::move(op)),
        done_(std::move(done)),
        keep_(std::move(keep)),
        deadline_(detail::core::deadlineAfter(comm_->timeout())) {
    // It ends by the communicator's deadline, as a blocking call does,
    // whether it is waited for, tested or left alone meanwhile.
    comm_->world().calls().expireAt(op_, deadline_);
  }

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
    const auto until = detail::core::waitDeadline(comm_->rank(), op_->name(), timeout, comm_->timeout());
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
  // Done: rethrows the operation's error; a failed collective leaves the
  // communicator unusable for further collectives (as a blocking one does).
  void finish() {
    try {
      done_->rethrowIfFailed();
    } catch (const Error& e) {
      if (op_->kind() == Op::Kind::Collective) comm_->markBroken(e.what());
      throw;
    }
  }

  std::shared_ptr<Communicator> comm_;
  std::shared_ptr<Op> op_;
  std::shared_ptr<Completion> done_;
  std::vector<unsigned char> keep_;
  World::Clock::time_point deadline_;  // the communicator's timeout from the start
};

}  // namespace

std::unique_ptr<Request::Impl> makeRequest(std::shared_ptr<Communicator> comm, std::shared_ptr<Op> op,
                                           std::shared_ptr<Completion> done, std::vector<unsigned char> keep) {
  return std::make_unique<OpRequest>(std::move(comm), std::move(op), std::move(done), std::move(keep));
}

}  // namespace tether
