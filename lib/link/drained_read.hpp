// One read of what has arrived on a TCP socket, as async_read_some, without
// the failing try after a read that drained the socket. Asio's epoll reactor
// tries a read at once when it is started and waits for readiness only when
// that fails; it stops trying first only after a read that returned 0 bytes
// (EOF). A link's next frame usually comes only after this rank has answered,
// so the read started after a frame found the socket empty and failed
// (EAGAIN): one system call per message for nothing (docs/benchmarks.md,
// "System calls per message").
//
// Here a read reports the descriptor exhausted to the reactor, under the
// reactor's lock, as Asio's own read does for EOF, when the read proves that
// the next thing the socket has will raise a new edge-triggered event:
//   - it got fewer bytes than it asked for,
//   - the kernel says nothing is left (TCP_INQ: the hint recvmsg returns when
//     the socket has it on, enableDrainHint; it is nonzero also once the
//     peer's FIN has come, so a close that came with the last bytes is read
//     at once, as EOF), and
//   - the readiness event the reactor last saw for the socket had no
//     EPOLLERR or EPOLLHUP (a reset that came with the last bytes: the error
//     is pending, no new event will come, and TCP_INQ says 0).
// Otherwise the next read tries at once, as Asio's does. A socket without the
// hint (Unix streams, a kernel before 4.18) is never reported exhausted.
//
// Asio's reactor internals are used (reactor_op, the descriptor's reactor
// data and the events it last saw), so only for the Boost version whose code
// this was checked against (1.81, epoll); elsewhere it is async_read_some.
#pragma once

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/query.hpp>
#include <boost/asio/recycling_allocator.hpp>
#include <boost/system/error_code.hpp>
#include <boost/version.hpp>
#include <cerrno>
#include <cstring>
#include <cstddef>
#include <memory>
#include <utility>

#include "base/layer.hpp"

#if BOOST_VERSION / 100 == 1081 && defined(BOOST_ASIO_HAS_EPOLL) && !defined(BOOST_ASIO_HAS_IO_URING_AS_DEFAULT)
#define TETHER_DRAINED_READ 1
#include <boost/asio/detail/bind_handler.hpp>
#include <boost/asio/detail/epoll_reactor.hpp>
#include <boost/asio/detail/handler_cont_helpers.hpp>
#include <boost/asio/detail/handler_work.hpp>
#include <boost/asio/detail/socket_ops.hpp>
#else
#define TETHER_DRAINED_READ 0
#endif

TETHER_LAYER(3, "link");

namespace tether::link {

// Whether drainedReadSome skips the try after a draining read (else it is async_read_some).
inline constexpr bool kDrainedReadActive = TETHER_DRAINED_READ != 0;

// The reactor of a socket's io_context, looked up at its first read and kept
// by the socket's owner: Asio's lookup (use_service) takes the context's
// registry lock, on every read otherwise.
struct ReactorCache {
  void* reactor = nullptr;
};

#ifndef TCP_INQ
#define TCP_INQ 36
#define TCP_CM_INQ TCP_INQ
#endif

// Turns on the kernel's hint of what a read left (TCP_INQ) on a TCP socket,
// which drainedReadSome needs to skip a try. Harmless where it fails.
inline void enableDrainHint(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_INQ, &one, sizeof one);
}

#if TETHER_DRAINED_READ
namespace drained_detail {

namespace ad = boost::asio::detail;
using boost::system::error_code;

// The socket's reactor state (basic_socket keeps it protected).
template <class Socket>
struct SocketImpl : Socket {
  static auto& of(Socket& s) { return (s.*(&SocketImpl::impl_)).get_implementation(); }
};

// The events the reactor last saw for a descriptor (kept in the scheduler
// operation the descriptor's state is; set under the reactor's turn, read
// here under the descriptor's lock, by the thread that runs the io_context).
struct ReadyEvents : ad::scheduler_operation {
  static unsigned of(ad::epoll_reactor::descriptor_state& d) {
    // A private base: only a C-style cast converts to it (NOLINT).
    const auto* op = (const ad::scheduler_operation*)(&d);  // NOLINT(google-readability-casting)
    return op->*(&ReadyEvents::task_result_);
  }
};

template <class Handler, class IoExecutor>
class RecvOp final : public ad::reactor_op {
 public:
  using Alloc = boost::asio::recycling_allocator<RecvOp>;

  RecvOp(int fd, ad::epoll_reactor::descriptor_state* data, boost::asio::mutable_buffer buf, Handler&& h,
         const IoExecutor& ex)
      : reactor_op(error_code(), &perform, &complete),
        fd_(fd),
        data_(data),
        buf_(buf),
        handler_(std::move(h)),
        work_(handler_, ex) {}

  static RecvOp* make(int fd, ad::epoll_reactor::descriptor_state* data, boost::asio::mutable_buffer buf, Handler&& h,
                      const IoExecutor& ex) {
    Alloc a;
    RecvOp* p = std::allocator_traits<Alloc>::allocate(a, 1);
    try {
      return new (p) RecvOp(fd, data, buf, std::move(h), ex);
    } catch (...) {
      std::allocator_traits<Alloc>::deallocate(a, p, 1);
      throw;
    }
  }
  static void destroy(RecvOp* p) {
    Alloc a;
    p->~RecvOp();
    std::allocator_traits<Alloc>::deallocate(a, p, 1);
  }

  // Cancels this read when the handler's cancellation slot is emitted.
  struct Cancel {
    ad::reactor* reactor;
    ad::reactor::per_descriptor_data* data;
    int fd;
    void operator()(boost::asio::cancellation_type_t type) {
      using boost::asio::cancellation_type;
      if (!!(type & (cancellation_type::terminal | cancellation_type::partial | cancellation_type::total)))
        reactor->cancel_ops_by_key(fd, *data, ad::reactor::read_op, this);
    }
  };

 private:
  // Called by the reactor under the descriptor's lock: at the start (the try)
  // and on each readiness edge while queued.
  static status perform(reactor_op* base) {
    auto* o = static_cast<RecvOp*>(base);
    for (;;) {
      alignas(cmsghdr) unsigned char control[CMSG_SPACE(sizeof(int))];
      iovec iov{o->buf_.data(), o->buf_.size()};
      msghdr m{};
      m.msg_iov = &iov;
      m.msg_iovlen = 1;
      m.msg_control = control;
      m.msg_controllen = sizeof control;
      const ssize_t n = ::recvmsg(o->fd_, &m, MSG_NOSIGNAL);
      if (n > 0) {
        o->bytes_transferred_ = static_cast<std::size_t>(n);
        return o->drained(m) ? done_and_exhausted : done;
      }
      if (n == 0) {
        o->ec_ = boost::asio::error::eof;
        return done_and_exhausted;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return not_done;
      o->ec_ = error_code(errno, boost::system::system_category());
      return done;
    }
  }

  // The rule of the file comment, after a read of at least one byte.
  bool drained(msghdr& m) const {
    if (bytes_transferred_ >= buf_.size()) return false;
    int left = -1;
    for (cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c))
      if (c->cmsg_level == IPPROTO_TCP && c->cmsg_type == TCP_CM_INQ && c->cmsg_len >= CMSG_LEN(sizeof(int)))
        std::memcpy(&left, CMSG_DATA(c), sizeof left);
    return left == 0 && (ReadyEvents::of(*data_) & (EPOLLERR | EPOLLHUP)) == 0;
  }

  // Called by the scheduler (owner null: destroyed unrun at shutdown).
  static void complete(void* owner, ad::operation* base, const error_code&, std::size_t) {
    auto* o = static_cast<RecvOp*>(base);
    ad::handler_work<Handler, IoExecutor> work(std::move(o->work_));
    ad::binder2<Handler, error_code, std::size_t> call(0, std::move(o->handler_), o->ec_, o->bytes_transferred_);
    destroy(o);  // before the upcall, which may start the next read
    if (owner) work.complete(call, call.handler_);
  }

  int fd_;
  ad::epoll_reactor::descriptor_state* data_;
  boost::asio::mutable_buffer buf_;
  Handler handler_;
  ad::handler_work<Handler, IoExecutor> work_;
};

template <class Socket>
struct Initiate {
  template <class Handler>
  void operator()(Handler&& handler, Socket* socket, boost::asio::mutable_buffer buf, ReactorCache* cache) const {
    using H = std::decay_t<Handler>;
    using Op = RecvOp<H, typename Socket::executor_type>;
    auto& impl = SocketImpl<Socket>::of(*socket);
    if (!cache->reactor)
      cache->reactor = &boost::asio::use_service<ad::reactor>(
          boost::asio::query(socket->get_executor(), boost::asio::execution::context));
    auto& reactor = *static_cast<ad::reactor*>(cache->reactor);
    const bool continuation = boost_asio_handler_cont_helpers::is_continuation(handler);
    auto slot = boost::asio::get_associated_cancellation_slot(handler);
    Op* op = Op::make(impl.socket_, impl.reactor_data_, buf, std::move(handler), socket->get_executor());
    if (slot.is_connected())
      op->cancellation_key_ =
          &slot.template emplace<typename Op::Cancel>(typename Op::Cancel{&reactor, &impl.reactor_data_, impl.socket_});
    if (buf.size() == 0 || !((impl.state_ & ad::socket_ops::non_blocking) ||
                             ad::socket_ops::set_internal_non_blocking(impl.socket_, impl.state_, true, op->ec_))) {
      reactor.post_immediate_completion(op, continuation);  // nothing to read into, or ec_ says why
      return;
    }
    reactor.start_op(ad::reactor::read_op, impl.socket_, impl.reactor_data_, op, continuation, true);
  }
};

}  // namespace drained_detail
#endif

// As socket.async_read_some(buf, token) on a stream socket (an empty buffer
// completes at once with 0): completes with (error_code, bytes read);
// asio::error::eof once the peer has closed.
// `cache` (one per socket, or per io_context) keeps the reactor's address.
template <class Socket, class Token>
auto drainedReadSome(Socket& socket, boost::asio::mutable_buffer buf, Token&& token, ReactorCache& cache) {
#if TETHER_DRAINED_READ
  return boost::asio::async_initiate<Token, void(boost::system::error_code, std::size_t)>(
      drained_detail::Initiate<Socket>{}, token, &socket, buf, &cache);
#else
  (void)cache;
  return socket.async_read_some(buf, std::forward<Token>(token));
#endif
}

}  // namespace tether::link
