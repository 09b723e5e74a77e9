// tether/request.hpp — a nonblocking call in flight (Bootstrap::iallgather,
// ialltoall, ibarrier, isend, irecv). Header-only, C++17.
//
//  * test(): makes progress on the calling thread (runs the event loop's
//    ready handlers) and returns true once the call is done; rethrows the
//    call's error (once done, every later test() or wait() rethrows it
//    again). A test loop costs what wait() does: once tests stop making
//    progress (past TcpOptions::pollUs, at once on an oversubscribed host), each
//    test waits for it in the kernel for at most 1 ms, never past the call's
//    deadline, instead of returning at once. Every
//    request ends by its communicator's timeout, counted from when it was
//    started, as a blocking call does: once it has passed, test() rethrows
//    Error{Timeout} naming the rank it waited for, whether or not anybody
//    tested or waited meanwhile.
//  * wait(timeout): blocks, sleeping in the kernel, until done; 0 means the
//    communicator's timeout (setTimeout; else TETHER_TIMEOUT_MS, else
//    kDefaultTimeout), a negative value is Error{InvalidArgument}. When it
//    passes the call fails with Error{Timeout}, exactly as a blocking call.
//  * cancel(): true if this call ended because of it (it then fails with
//    Error{Aborted} "cancelled on this rank"); false if it had already
//    completed or can no longer be withdrawn:
//      - irecv not yet matched by an arriving frame: withdrawn cleanly; the
//        communicator stays usable and a later send to us with that tag is
//        matched by the next irecv/recv posted for it.
//      - isend: never withdrawn (its payload is already handed to the
//        transport); cancel() returns false and the send completes (over TCP
//        a send past the peer's point-to-point window completes once the
//        peer receives earlier messages, or fails at its deadline).
//      - collective (iallgather, ialltoall, ibarrier): peers have started it
//        too, so it cannot be withdrawn: it fails here, the communicator is
//        unusable for further collectives ("communicator unusable after an
//        earlier collective failed"), and on the world communicator the peers
//        get an abort notice naming this rank (as after any failed
//        collective), so they fail at once instead of at their deadline.
//  * Destroying a request that is not done cancels it and waits for its end,
//    so the caller's buffers are never touched after the destructor returns.
//    A moved-from or default-constructed request is empty (valid() false);
//    test() on it returns true, wait() and cancel() do nothing.
#pragma once

#include <chrono>
#include <memory>
#include <utility>

namespace tether {

class Request {
 public:
  // What a bootstrap implements behind a Request (TcpBootstrap's: lib/core/requests.cpp).
  class Impl {
   public:
    virtual ~Impl() = default;
    virtual bool test() = 0;
    virtual void wait(std::chrono::milliseconds timeout) = 0;
    virtual bool cancel() = 0;
  };

  Request() = default;
  explicit Request(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
  Request(Request&&) noexcept = default;
  Request& operator=(Request&&) noexcept = default;
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  ~Request() = default;

  bool valid() const { return impl_ != nullptr; }
  bool test() { return impl_ ? impl_->test() : true; }
  void wait(std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) {
    if (impl_) impl_->wait(timeout);
  }
  bool cancel() { return impl_ ? impl_->cancel() : false; }

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tether
