// The Stream calls every Asio stream-socket kind shares (TCP, Unix): direct
// non-blocking reads and writes that report would_block, the awaited forms,
// close, the peer's text. A kind adds connect() and its socket options.
#pragma once

#include <unistd.h>

#include <boost/asio/execution/context.hpp>
#include <boost/asio/query.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/descriptors.hpp"
#include "base/layer.hpp"
#include "link/drained_read.hpp"
#include "link/stream.hpp"

TETHER_LAYER(3, "link");

namespace tether::link {

// The event loop an Asio object runs on: the owner its descriptors are
// remembered under (base/descriptors.hpp; a world closes them in a forked child).
inline const void* descriptorOwner(const asio::any_io_executor& ex) {
  return &asio::query(ex, asio::execution::context);
}

// Opens `s` (a socket or an acceptor) for `protocol`, close-on-exec from the
// start: Asio's open() calls socket(2) without SOCK_CLOEXEC.
template <class Socket>
void openCloseOnExec(Socket& s, const typename Socket::protocol_type& protocol, boost::system::error_code& ec) {
  const int fd =
      fds::socket(protocol.family(), protocol.type(), protocol.protocol(), descriptorOwner(s.get_executor()));
  if (fd < 0) {
    ec.assign(errno, boost::system::system_category());
    return;
  }
  s.assign(protocol, fd, ec);
  if (ec) ::close(fd);
}

// Accepts one connection on `a` (made non-blocking by its listener's open()),
// close-on-exec from the start (accept4; Asio's accept calls accept(2)). As
// Asio's async_accept: it tries at once and waits for readiness only when
// nothing is pending, skips a connection that is gone before it is accepted,
// and throws boost::system::system_error (operation_aborted when `a` closes
// meanwhile, bad_descriptor when it is closed already).
template <class Acceptor>
asio::awaitable<typename Acceptor::protocol_type::socket> acceptCloseOnExec(Acceptor& a,
                                                                            typename Acceptor::endpoint_type& from) {
  for (;;) {
    socklen_t len = static_cast<socklen_t>(from.capacity());
    const int fd = fds::accept(a.native_handle(), from.data(), &len, descriptorOwner(a.get_executor()));
    if (fd < 0) {
      const int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK)
        co_await a.async_wait(Acceptor::wait_read, asio::use_awaitable);
      else if (err != EINTR && err != ECONNABORTED && err != EPROTO)
        throw boost::system::system_error(err, boost::system::system_category(), "accept");
      continue;
    }
    from.resize(len);
    typename Acceptor::protocol_type::socket s(a.get_executor());
    boost::system::error_code ec;
    s.assign(from.protocol(), fd, ec);
    if (ec) {
      ::close(fd);
      throw boost::system::system_error(ec, "accept");
    }
    co_return s;
  }
}

template <class Socket>
class SocketStream : public Stream {
 public:
  SocketStream(Socket socket, std::string peer) : socket_(std::move(socket)), peer_(std::move(peer)) {}

  // Over TCP, no try at once after a read that drained the socket: it waits
  // for readiness first (drained_read.hpp). Elsewhere async_read_some.
  void readSome(asio::mutable_buffer buf, ReadDone& done, std::shared_ptr<void> keep) override {
    if constexpr (std::is_same_v<typename Socket::protocol_type, asio::ip::tcp>)
      drainedReadSome(socket_, buf, ReadHandler{&done, std::move(keep)}, reactor_);
    else
      socket_.async_read_some(buf, ReadHandler{&done, std::move(keep)});
  }
  asio::awaitable<void> read(asio::mutable_buffer buf) override {
    co_await asio::async_read(socket_, buf, asio::use_awaitable);
  }

  std::size_t writeSomeNow(std::span<const asio::const_buffer> bufs, boost::system::error_code& ec) override {
    std::size_t written = socket_.write_some(bufs, ec);
    if (ec == asio::error::try_again) ec = asio::error::would_block;
    return written;
  }
  asio::awaitable<void> write(std::vector<asio::const_buffer> bufs) override {
    co_await asio::async_write(socket_, bufs, asio::use_awaitable);
  }

  void close() override {
    boost::system::error_code ignored;
    socket_.shutdown(Socket::shutdown_both, ignored);
    socket_.close(ignored);
  }
  const std::string& peer() const override { return peer_; }
  asio::any_io_executor executor() override { return socket_.get_executor(); }

  // The kind's socket options, on a connected or accepted socket.
  virtual void configure() = 0;

 protected:
  // A kind's connect(): opens the socket (close-on-exec) unless it is open,
  // connects, drops the connect's write interest, sets the kind's options.
  asio::awaitable<void> connectTo(const typename Socket::endpoint_type& ep, std::string peer) {
    peer_ = std::move(peer);
    if (!socket_.is_open()) {
      boost::system::error_code ec;
      openCloseOnExec(socket_, ep.protocol(), ec);
      if (ec) throw boost::system::system_error(ec, "socket");
    }
    co_await socket_.async_connect(ep, asio::use_awaitable);
    forgetWriteReadiness();
    configure();
  }

  // After a connect that had to wait: the connect registered the socket for
  // write readiness with Asio's reactor, for good, and every later wait for a
  // read re-arms the descriptor (EPOLL_CTL_MOD), which then reports it
  // writable at once: an event-loop wake-up for nothing after every frame
  // read. Registering the descriptor anew drops that interest.
  void forgetWriteReadiness() {
    boost::system::error_code ec;
    const auto protocol = socket_.local_endpoint(ec).protocol();
    if (ec) return;
    const auto fd = socket_.release(ec);
    if (ec) return;
    socket_.assign(protocol, fd, ec);
    if (ec) ::close(fd);  // the stream is closed now: its next read or write says so
  }

  Socket socket_;
  ReactorCache reactor_;  // drainedReadSome's (TCP)
  std::string peer_;
};

}  // namespace tether::link
