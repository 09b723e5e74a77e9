#include "link/unix_stream.hpp"

#include <sys/un.h>

#include <boost/asio/read.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <stdexcept>

namespace tether::link {
namespace {

class UnixStream final : public Stream {
 public:
  UnixStream(local::socket socket, std::string peer) : socket_(std::move(socket)), peer_(std::move(peer)) {}

  asio::awaitable<void> connect(const Endpoint& to) override {
    if (to.kind != "unix") throw std::invalid_argument("a Unix stream cannot connect to a '" + to.kind + "' endpoint");
    auto ep = unixEndpoint(to.address);
    peer_ = to.address;
    co_await socket_.async_connect(ep, asio::use_awaitable);
    configure();
  }

  void configure() {
    boost::system::error_code ignored;
    socket_.non_blocking(true, ignored);
  }

  std::size_t readSomeNow(asio::mutable_buffer buf, boost::system::error_code& ec) override {
    std::size_t got = socket_.read_some(buf, ec);
    if (ec == asio::error::try_again) ec = asio::error::would_block;
    return got;
  }
  asio::awaitable<void> readable() override {
    co_await socket_.async_wait(local::socket::wait_read, asio::use_awaitable);
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
    socket_.shutdown(local::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }
  const std::string& peer() const override { return peer_; }
  asio::any_io_executor executor() override { return socket_.get_executor(); }

 private:
  local::socket socket_;
  std::string peer_;
};

}  // namespace

local::endpoint unixEndpoint(const std::string& address) {
  if (address.size() + 1 > sizeof(sockaddr_un::sun_path))
    throw std::invalid_argument("Unix socket address too long: '" + address + "'");
  if (!address.empty() && address[0] == '@') return local::endpoint(std::string(1, '\0') + address.substr(1));
  return local::endpoint(address);
}

std::shared_ptr<Stream> UnixDialer::open() { return std::make_shared<UnixStream>(local::socket(io_), "?"); }

std::shared_ptr<UnixListener> UnixListener::open(asio::io_context& io, const std::string& address,
                                                 boost::system::error_code& ec) {
  local::endpoint at;
  try {
    at = unixEndpoint(address);
  } catch (const std::invalid_argument&) {
    ec = asio::error::invalid_argument;
    return nullptr;
  }
  auto l = std::make_shared<UnixListener>(io, address);
  auto& a = l->acceptor_;
  a.open(at.protocol(), ec);
  if (!ec) a.bind(at, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return nullptr;
  return l;
}

asio::awaitable<std::shared_ptr<Stream>> UnixListener::accept() {
  local::socket s = co_await acceptor_.async_accept(asio::use_awaitable);
  auto stream = std::make_shared<UnixStream>(std::move(s), address_ + " (accepted)");
  stream->configure();
  co_return stream;
}

void UnixListener::close() {
  boost::system::error_code ignored;
  acceptor_.close(ignored);
}

}  // namespace tether::link
