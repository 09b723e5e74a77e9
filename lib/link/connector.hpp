// Bringing links up: dialling, accepting and the three-frame handshake of
// wire/handshake.hpp (challenge -> hello + proof -> welcome + proof, or a
// reject), over the Stream seam (stream.hpp): a Dialer opens the streams it
// dials, a Listener yields the ones it accepts. The owner decides who is
// admitted and receives the finished streams through the Admission interface.
// Every step runs under a watchdog that closes the stream at the handshake
// deadline, so a silent or slow stranger costs one stream for at most that
// long; an authenticated hello held for its sender's previous connection (R4)
// until the deadline is answered instead: dial again. Progress thread only.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "base/layer.hpp"
#include "link/stream.hpp"
#include "wire/handshake.hpp"

TETHER_LAYER(3, "link");

namespace tether::link {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

struct ConnectorConfig {
  int rank = 0;
  int nranks = 1;
  wire::Secret secret{};
  std::uint64_t worldId = 0;
  std::chrono::milliseconds handshakeTimeout{10000};
  int maxDials = 32;       // dials in flight at once; more wait their turn
  int maxHandshakes = 64;  // incoming handshakes at once; the kernel's backlog holds the rest
};

// How a dial retries. An unreachable or silent attempt is retried (backoff
// 10 ms .. 1 s, with jitter) until `until`. A refused one only with
// `retryRefused` (a root that is not listening yet), because a refusal
// otherwise means the peer's process is gone; a reset one (or one closed
// before the handshake ended) until `brokenUntil` as well: after the
// rendezvous every rank is known to listen and answer, so a peer that keeps
// cutting the handshake before it answers is lost, not slow. One that cut it
// after its challenge (alive: its handshake deadline passed first, a loaded
// host), or answers "dial again" (it held our hello past its handshake
// deadline), is retried until `until`.
struct DialPolicy {
  Clock::time_point until{};
  bool retryRefused = false;
  Clock::time_point brokenUntil = Clock::time_point::max();
};

// What admission decides about an authenticated hello.
struct Verdict {
  enum class Kind { Welcome, Reject, Wait } kind = Kind::Welcome;
  wire::Reject reject;  // Kind::Reject
  static Verdict welcome() { return {}; }
  static Verdict refuse(wire::RejectCode code, std::string reason) { return {Kind::Reject, {code, std::move(reason)}}; }
  // Ask again once the peer's previous connection has closed (R4).
  static Verdict wait() { return {Kind::Wait, {}}; }
};

// A dial (or an admitted incoming handshake) that ended without a link.
struct ConnectFailure {
  std::string reason;  // what the last attempt got, in words
  int attempts = 1;
  bool dialed = true;             // false: an incoming handshake we had admitted
  bool retriesExhausted = false;  // a retried dial ran out of time
  bool peerClosing = false;       // the peer refused because it is shutting down
  bool refused = false;           // the peer answered with a reject (not a network failure)
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
  // An authenticated hello of this world from `peer`, dialled in its
  // connection `epoch` to us: welcome it (the owner reserves the link to
  // `peer` now), refuse it, or wait.
  virtual Verdict admit(int peer, std::uint32_t epoch, const std::string& remote) = 0;
  // Waits until `peer`'s previous connection here has closed, or `deadline`.
  virtual asio::awaitable<void> predecessorClosed(int peer, Clock::time_point deadline) = 0;
  // The handshake finished: `stream` is the stream to `peer` for the link of
  // connection `epoch` (the owner closes a stale one).
  virtual void connected(int peer, std::uint32_t epoch, std::shared_ptr<Stream> stream, bool dialedByUs) = 0;
  virtual void connectFailed(int peer, std::uint32_t epoch, const ConnectFailure& failure) = 0;
  virtual void refused(const Refusal& refusal) = 0;
  // The owner is closing: stop accepting, say nothing about dropped strangers.
  virtual bool closing() const = 0;
  // Whether a dial may still be retried (not closing, not aborted).
  virtual bool mayRetry() const = 0;
  // Whether the link of connection `epoch` to `peer` still waits for this
  // dial (false once it is closed or linked another way).
  virtual bool stillDialing(int peer, std::uint32_t epoch) const = 0;
  // An authenticated observer (wire::kObserverRank, tether-status) was
  // welcomed: the owner answers its questions on `stream` and closes it. It is
  // never a link. By default it is closed unanswered.
  virtual void observer(std::shared_ptr<Stream> stream) { stream->close(); }

 protected:
  ~Admission() = default;
};

// A reject in words, as the dialler reports it ("rejected our proof of the secret ...").
std::string rejectText(const wire::Reject& r);

class Connector {
 public:
  // Dials through `dialer` (the stream kind of every endpoint given to dial()).
  Connector(asio::io_context& io, ConnectorConfig config, Admission& admission, std::unique_ptr<Dialer> dialer);
  // Accepts on `listener` until it is closed.
  void listen(std::shared_ptr<Listener> listener);
  // Dials `peer` at `ep` for its connection `epoch` (at most maxDials at once).
  void dial(int peer, std::uint32_t epoch, Endpoint ep, DialPolicy policy);
  // "N attempts; last: <reason>" while a dial to `peer` retries; empty otherwise.
  std::string retrying(int peer) const;

 private:
  struct Dial {
    int peer;
    std::uint32_t epoch;
    Endpoint ep;
    DialPolicy policy;
  };
  asio::awaitable<void> acceptLoop(std::shared_ptr<Listener> listener);
  asio::awaitable<void> serveIncoming(std::shared_ptr<Stream> stream);
  asio::awaitable<std::optional<wire::Reject>> admit(const wire::Hello& hello, const std::string& remote,
                                                    Clock::time_point deadline, std::function<bool()> expired);
  asio::awaitable<void> dialPeer(Dial d);
  // One dial attempt; true when it is finished (linked, or the peer keeps its
  // own connection), false with `failure` filled when it failed.
  asio::awaitable<bool> dialOnce(const Dial& d, Clock::time_point deadline, ConnectFailure& failure, bool& retriable);
  void dialEnded();

  asio::io_context& io_;
  const ConnectorConfig cfg_;
  Admission& admission_;
  const std::unique_ptr<Dialer> dialer_;
  int dialsInFlight_ = 0;
  std::deque<Dial> dialQueue_;
  std::unordered_map<int, std::string> retrying_;  // per peer, while its dial waits to retry
  int handshakes_ = 0;                             // incoming handshakes in progress
  asio::steady_timer acceptPaused_;                // the accept loop waits here while handshakes_ is at the limit
};

}  // namespace tether::link
