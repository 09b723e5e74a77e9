// The Stream calls every Asio stream-socket kind shares (TCP, Unix): direct
// non-blocking reads and writes that report would_block, the awaited forms,
// close, the peer's text. A kind adds connect() and its socket options.
#pragma once

#include <boost/asio/read.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <string>
#include <utility>
#include <vector>

#include "base/layer.hpp"
#include "link/stream.hpp"

TETHER_LAYER(3, "link");

namespace tether::link {

template <class Socket>
class SocketStream : public Stream {
 public:
  SocketStream(Socket socket, std::string peer) : socket_(std::move(socket)), peer_(std::move(peer)) {}

  std::size_t readSomeNow(asio::mutable_buffer buf, boost::system::error_code& ec) override {
    std::size_t got = socket_.read_some(buf, ec);
    if (ec == asio::error::try_again) ec = asio::error::would_block;
    return got;
  }
  asio::awaitable<void> readable() override { co_await socket_.async_wait(Socket::wait_read, asio::use_awaitable); }
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

 protected:
  Socket socket_;
  std::string peer_;
};

}  // namespace tether::link
