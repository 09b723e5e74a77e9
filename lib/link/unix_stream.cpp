#include "link/unix_stream.hpp"

#include <sys/un.h>

#include <boost/asio/use_awaitable.hpp>
#include <stdexcept>

#include "link/socket_stream.hpp"

namespace tether::link {
namespace {

class UnixStream final : public SocketStream<local::socket> {
 public:
  UnixStream(local::socket socket, std::string peer) : SocketStream(std::move(socket), std::move(peer)) {}

  asio::awaitable<void> connect(const Endpoint& to) override {
    if (to.kind != "unix") throw std::invalid_argument("a Unix stream cannot connect to a '" + to.kind + "' endpoint");
    co_await connectTo(unixEndpoint(to.address), to.address);
  }

  void configure() override {
    boost::system::error_code ignored;
    socket_.non_blocking(true, ignored);
  }
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
  openCloseOnExec(a, at.protocol(), ec);
  if (!ec) a.bind(at, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (!ec) a.non_blocking(true, ec);  // accept() waits for readiness, then accepts
  if (ec) return nullptr;
  return l;
}

asio::awaitable<std::shared_ptr<Stream>> UnixListener::accept() {
  local::endpoint from;
  local::socket s = co_await acceptCloseOnExec(acceptor_, from);
  auto stream = std::make_shared<UnixStream>(std::move(s), address_ + " (accepted)");
  stream->configure();
  co_return stream;
}

std::shared_ptr<Stream> UnixListener::acceptNow(boost::system::error_code& ec) {
  acceptor_.non_blocking(true, ec);
  if (ec) return nullptr;
  local::socket s(acceptor_.get_executor());
  acceptor_.accept(s, ec);
  if (ec) return nullptr;
  auto stream = std::make_shared<UnixStream>(std::move(s), address_ + " (accepted)");
  stream->configure();
  return stream;
}

void UnixListener::close() {
  boost::system::error_code ignored;
  acceptor_.close(ignored);
}

}  // namespace tether::link
