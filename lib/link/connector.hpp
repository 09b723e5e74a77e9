// Bringing links up: dialling, accepting and the three-frame handshake of
// wire/handshake.hpp (challenge -> hello + proof -> welcome + proof, or a
// reject). The owner decides who is admitted and receives the finished
// sockets through the Admission interface. Every step runs under a watchdog
// that closes the socket at the handshake deadline, so a silent or slow
// stranger costs one socket for at most that long. Progress thread only.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "base/layer.hpp"
#include "wire/handshake.hpp"

TETHER_LAYER(3, "link");

namespace tether::link {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

struct ConnectorConfig {
  int rank = 0;
  int nranks = 1;
  wire::Secret secret{};
  std::uint64_t worldId = 0;
  std::chrono::milliseconds handshakeTimeout{10000};
  int keepaliveIdleS = 10, keepaliveIntervalS = 2, keepaliveCount = 3;
};

// A dial (or an admitted incoming handshake) that ended without a link.
struct ConnectFailure {
  std::string reason;             // what the last attempt got, in words
  int attempts = 1;
  bool dialed = true;             // false: an incoming handshake we had admitted
  bool retriesExhausted = false;  // a retried dial ran out of time
  bool peerClosing = false;       // the peer refused because it is shutting down
};

// An incoming connection refused before admission: it could not prove the
// secret, or claims another world or world size.
struct Refusal {
  int claimedRank = -1;
  wire::RejectCode code{};
  std::string remote;
  std::string reason;
};

class Admission {
 public:
  // An authenticated hello of this world from `peer`: nullopt admits it (the
  // owner reserves the link to `peer` now), else the reject to send.
  virtual std::optional<wire::Reject> admit(int peer, const std::string& remote) = 0;
  // The handshake finished: `socket` is the stream to `peer`.
  virtual void connected(int peer, tcp::socket socket, bool dialedByUs) = 0;
  virtual void connectFailed(int peer, const ConnectFailure& failure) = 0;
  virtual void refused(const Refusal& refusal) = 0;
  // The owner is closing: stop accepting, say nothing about dropped strangers.
  virtual bool closing() const = 0;
  // Whether a dial may still be retried (not closing, not aborted).
  virtual bool mayRetry() const = 0;

 protected:
  ~Admission() = default;
};

class Connector {
 public:
  Connector(asio::io_context& io, ConnectorConfig config, Admission& admission);
  const ConnectorConfig& config() const { return cfg_; }
  // Accepts on `acceptor` (owned by the caller) until it is closed.
  void listen(tcp::acceptor& acceptor);
  // Dials `peer` at `ep`. With `retryUntil`, a refused, reset, unreachable or
  // silent attempt is retried (backoff 10 ms .. 1 s) until then.
  void dial(int peer, tcp::endpoint ep, std::optional<Clock::time_point> retryUntil = std::nullopt);

 private:
  asio::awaitable<void> acceptLoop(tcp::acceptor& acceptor);
  asio::awaitable<void> serveIncoming(tcp::socket socket, tcp::endpoint from);
  asio::awaitable<void> dialPeer(int peer, tcp::endpoint ep, std::optional<Clock::time_point> retryUntil);
  // One dial attempt; true when it is finished (linked, or the peer keeps its
  // own connection), false with `failure` filled when it failed.
  asio::awaitable<bool> dialOnce(int peer, const tcp::endpoint& ep, Clock::time_point deadline,
                                 bool retrying, ConnectFailure& failure, bool& retriable);

  asio::io_context& io_;
  const ConnectorConfig cfg_;
  Admission& admission_;
};

}  // namespace tether::link
