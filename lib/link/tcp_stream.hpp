// The TCP kind of stream (endpoint kind "tcp", address "host:port" or
// "[v6]:port"): a Stream that owns a tcp::socket (TCP_NODELAY, keepalive and
// TCP_USER_TIMEOUT set once it is connected, non-blocking so that reads and
// writes can be tried directly), its Dialer and its Listener.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <memory>
#include <optional>

#include "base/layer.hpp"
#include "base/peer_address.hpp"
#include "link/stream.hpp"

TETHER_LAYER(3, "link");

namespace tether::link {

using tcp = asio::ip::tcp;

// Keepalive: a peer whose host vanished is noticed within
// idle + interval * count seconds; unacknowledged data fails within the same
// bound (TCP_USER_TIMEOUT).
struct TcpOptions {
  int keepaliveIdleS = 10, keepaliveIntervalS = 2, keepaliveCount = 3;
};

Endpoint tcpEndpoint(const tcp::endpoint& ep);
Endpoint tcpEndpoint(const PeerAddress& a);

class TcpDialer final : public Dialer {
 public:
  TcpDialer(asio::io_context& io, TcpOptions options) : io_(io), options_(options) {}
  std::shared_ptr<Stream> open() override;

 private:
  asio::io_context& io_;
  const TcpOptions options_;
};

class TcpListener final : public Listener {
 public:
  // Listens on `at` (with SO_REUSEADDR when `reuseAddress`), or on `adopted`:
  // a socket already bound there (createUniqueId()'s reservation). Null with
  // `ec` set when it cannot.
  static std::shared_ptr<TcpListener> open(asio::io_context& io, TcpOptions options, const tcp::endpoint& at,
                                           bool reuseAddress, std::optional<int> adopted,
                                           boost::system::error_code& ec);
  TcpListener(asio::io_context& io, TcpOptions options) : acceptor_(io), options_(options) {}
  tcp::endpoint localEndpoint() const { return acceptor_.local_endpoint(); }

  asio::awaitable<std::shared_ptr<Stream>> accept() override;
  Endpoint address() const override;
  bool isOpen() const override { return acceptor_.is_open(); }
  void close() override;

 private:
  tcp::acceptor acceptor_;
  const TcpOptions options_;
};

}  // namespace tether::link
