#include "link/tcp_stream.hpp"

#include <netinet/tcp.h>

#include <boost/asio/use_awaitable.hpp>
#include <stdexcept>

#include "link/socket_stream.hpp"

#include "base/endpoint.hpp"

namespace tether::link {
namespace {

class TcpStream final : public SocketStream<tcp::socket> {
 public:
  TcpStream(tcp::socket socket, TcpOptions options, std::string peer)
      : SocketStream(std::move(socket), std::move(peer)), options_(options) {}

  asio::awaitable<void> connect(const Endpoint& to) override {
    if (to.kind != "tcp") throw std::invalid_argument("a TCP stream cannot connect to a '" + to.kind + "' endpoint");
    auto hp = parseHostPort(to.address);
    co_await connectTo(tcp::endpoint(asio::ip::make_address(hp.host), hp.port), to.address);
    if (connectedToItself()) {
      // Nothing listened at a port of this host's ephemeral range, and the
      // kernel gave the dial that very port as its own: TCP's simultaneous
      // open connected the socket to itself. Kept, it would wait for a
      // challenge nobody sends and hold the port its listener needs (the root
      // then fails "address in use" and this rank times out). Reset it (no
      // TIME_WAIT left on the port) and report it refused, as it is: nothing
      // listens there yet.
      boost::system::error_code ignored;
      socket_.set_option(asio::socket_base::linger(true, 0), ignored);
      socket_.close(ignored);
      throw boost::system::system_error(asio::error::connection_refused, "connected to itself: nothing listens there");
    }
  }

  // Keepalive and TCP_USER_TIMEOUT bound how long a vanished host goes
  // unnoticed; TCP_INQ lets a read tell that it drained the socket
  // (drained_read.hpp); non-blocking mode lets Link try reads and writes directly
  // (they report would_block instead of waiting).
  void configure() override {
    boost::system::error_code ignored;
    socket_.set_option(tcp::no_delay(true), ignored);
    socket_.set_option(asio::socket_base::keep_alive(true), ignored);
    int fd = socket_.native_handle();
    ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &options_.keepaliveIdleS, sizeof(int));
    ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &options_.keepaliveIntervalS, sizeof(int));
    ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &options_.keepaliveCount, sizeof(int));
    // Unacknowledged data to a vanished host fails within the same bound.
    unsigned userTimeoutMs =
        static_cast<unsigned>((options_.keepaliveIdleS + options_.keepaliveIntervalS * options_.keepaliveCount) * 1000);
    ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &userTimeoutMs, sizeof userTimeoutMs);
    enableDrainHint(fd);  // reads skip the failing try after draining the socket
    socket_.non_blocking(true, ignored);
  }

 private:
  bool connectedToItself() const {
    boost::system::error_code a, b;
    const auto local = socket_.local_endpoint(a), remote = socket_.remote_endpoint(b);
    return !a && !b && local == remote;
  }

  const TcpOptions options_;
};

}  // namespace

Endpoint tcpEndpoint(const tcp::endpoint& ep) { return Endpoint{"tcp", toString(ep)}; }
Endpoint tcpEndpoint(const PeerAddress& a) { return tcpEndpoint(toEndpoint(a)); }

std::shared_ptr<Stream> TcpDialer::open() { return std::make_shared<TcpStream>(tcp::socket(io_), options_, "?"); }

std::shared_ptr<TcpListener> TcpListener::open(asio::io_context& io, TcpOptions options, const tcp::endpoint& at,
                                               bool reuseAddress, std::optional<int> adopted,
                                               boost::system::error_code& ec) {
  auto l = std::make_shared<TcpListener>(io, options);
  auto& a = l->acceptor_;
  if (adopted) {
    a.assign(at.protocol(), *adopted, ec);  // reserved close-on-exec (rendezvous/reserved_listener.cpp)
    if (!ec) fds::track(*adopted, descriptorOwner(a.get_executor()));
  } else {
    openCloseOnExec(a, at.protocol(), ec);
    if (!ec && reuseAddress) a.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) a.bind(at, ec);
  }
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (!ec) a.non_blocking(true, ec);  // accept() waits for readiness, then accepts
  if (ec) return nullptr;
  return l;
}

asio::awaitable<std::shared_ptr<Stream>> TcpListener::accept() {
  tcp::endpoint from;  // filled by accept(2): still known if the peer resets at once
  tcp::socket s = co_await acceptCloseOnExec(acceptor_, from);
  auto stream = std::make_shared<TcpStream>(std::move(s), options_, toString(from));
  stream->configure();
  co_return stream;
}

Endpoint TcpListener::address() const {
  boost::system::error_code ec;
  auto ep = acceptor_.local_endpoint(ec);
  return ec ? Endpoint{"tcp", "?"} : tcpEndpoint(ep);
}

void TcpListener::close() {
  boost::system::error_code ignored;
  acceptor_.close(ignored);
}

}  // namespace tether::link
