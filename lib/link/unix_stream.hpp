// The host-local kind of stream (endpoint kind "unix", address a socket path,
// or "@name" for a name in the abstract namespace: Linux, no file, gone with
// its last descriptor, scoped to the network namespace). The same contract as
// the TCP kind (stream.hpp): a Stream that owns a local stream socket
// (non-blocking once connected), its Dialer and its Listener. Used by the
// host-local rendezvous (rendezvous/host_group.hpp) between ranks of one host.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <memory>
#include <string>

#include "base/layer.hpp"
#include "link/stream.hpp"

TETHER_LAYER(3, "link");

namespace tether::link {

using local = asio::local::stream_protocol;

// "@name" -> the abstract socket `name`; anything else is a path. Throws
// std::invalid_argument for an address too long for sockaddr_un.
local::endpoint unixEndpoint(const std::string& address);

class UnixDialer final : public Dialer {
 public:
  explicit UnixDialer(asio::io_context& io) : io_(io) {}
  std::shared_ptr<Stream> open() override;

 private:
  asio::io_context& io_;
};

class UnixListener final : public Listener {
 public:
  // Listens at `address` ("@name" or a path). Null with `ec` set when it
  // cannot: address_in_use when another process holds the name.
  static std::shared_ptr<UnixListener> open(asio::io_context& io, const std::string& address,
                                            boost::system::error_code& ec);
  UnixListener(asio::io_context& io, std::string address) : acceptor_(io), address_(std::move(address)) {}

  asio::awaitable<std::shared_ptr<Stream>> accept() override;
  // A connection waiting in the queue, without waiting; null (`ec`
  // would_block) when there is none.
  std::shared_ptr<Stream> acceptNow(boost::system::error_code& ec);
  Endpoint address() const override { return Endpoint{"unix", address_}; }
  bool isOpen() const override { return acceptor_.is_open(); }
  void close() override;

 private:
  local::acceptor acceptor_;
  const std::string address_;
};

}  // namespace tether::link
