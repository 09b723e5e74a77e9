// Bringing a link up: the dialling side (dialPeer) and the accepting side
// (acceptLoop / serveIncoming) of the three-frame handshake described in
// wire/handshake.hpp. Every step runs under a watchdog timer that closes the
// socket at the handshake deadline, so a silent or slow stranger costs one
// socket for at most that long.
#include <netinet/tcp.h>

#include <fmt/format.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <algorithm>

#include "base/crypto.hpp"
#include "base/endpoint.hpp"
#include "base/log.hpp"
#include "core/world.hpp"
#include "link/frame_io.hpp"
#include "link/link.hpp"

namespace tether {
namespace {

using Clock = std::chrono::steady_clock;

void configureSocket(tcp::socket& s, const WorldConfig& cfg) {
  boost::system::error_code ignored;
  s.set_option(tcp::no_delay(true), ignored);
  s.set_option(asio::socket_base::keep_alive(true), ignored);
  int fd = s.native_handle();
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &cfg.keepaliveIdleS, sizeof(int));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &cfg.keepaliveIntervalS, sizeof(int));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cfg.keepaliveCount, sizeof(int));
  // Unacknowledged data to a vanished host fails within the same bound.
  unsigned userTimeoutMs = static_cast<unsigned>(
      (cfg.keepaliveIdleS + cfg.keepaliveIntervalS * cfg.keepaliveCount) * 1000);
  ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &userTimeoutMs, sizeof userTimeoutMs);
}

// Closes the socket when the deadline passes; shares ownership so a late
// timer callback never touches a destroyed socket.
struct Watchdog {
  Watchdog(asio::io_context& io, std::shared_ptr<tcp::socket> s, Clock::time_point deadline)
      : timer(io), expired(std::make_shared<bool>(false)) {
    timer.expires_at(deadline);
    timer.async_wait([s, flag = expired](boost::system::error_code ec) {
      if (ec) return;
      *flag = true;
      boost::system::error_code ignored;
      s->close(ignored);
    });
  }
  ~Watchdog() { timer.cancel(); }
  asio::steady_timer timer;
  std::shared_ptr<bool> expired;
};

std::string rejectText(const wire::Reject& r) {
  switch (r.code) {
    case wire::RejectCode::BadProof: return "rejected our proof of the secret (wrong UniqueId?): " + r.reason;
    case wire::RejectCode::WrongWorld: return "rejected us as a member of another world: " + r.reason;
    case wire::RejectCode::DuplicateRank: return "rejected us as a duplicate rank: " + r.reason;
    case wire::RejectCode::BadRank: return "rejected our rank: " + r.reason;
    case wire::RejectCode::ShuttingDown: return "is shutting down: " + r.reason;
    case wire::RejectCode::Simultaneous: return "kept its own connection: " + r.reason;
  }
  return "rejected the connection: " + r.reason;
}

}  // namespace

asio::awaitable<void> World::acceptLoop() {
  for (;;) {
    boost::system::error_code ec;
    tcp::socket s(io_);
    tcp::endpoint from;  // filled by accept(2): still known if the peer resets at once
    try {
      s = co_await acceptor_.async_accept(from, asio::use_awaitable);
    } catch (const boost::system::system_error& e) {
      ec = e.code();
    }
    if (shuttingDown_ || !acceptor_.is_open()) co_return;
    if (ec) {
      // Out of descriptors and similar: say so, back off, keep serving.
      log::warn(rank(), "accept failed: {}; retrying in 100 ms", ec.message());
      asio::steady_timer t(io_);
      t.expires_after(std::chrono::milliseconds(100));
      co_await t.async_wait(asio::use_awaitable);
      continue;
    }
    asio::co_spawn(io_, serveIncoming(std::move(s), from), asio::detached);
  }
}

asio::awaitable<void> World::serveIncoming(tcp::socket socket, tcp::endpoint from) {
  auto sock = std::make_shared<tcp::socket>(std::move(socket));
  std::string remote = toString(from);
  Watchdog watchdog(io_, sock, Clock::now() + cfg_.handshakeTimeout);
  std::string failure;
  int admitted = -1;  // the rank whose link this connection is to become
  try {
    configureSocket(*sock, cfg_);
    wire::Challenge challenge;
    challenge.rank = static_cast<std::uint32_t>(rank());
    crypto::randomBytes(challenge.nonce.data(), challenge.nonce.size());
    co_await writeFrame(*sock, wire::Kind::Challenge, wire::encode(challenge));
    auto f = co_await readFrame(*sock, wire::kMaxControlPayload);
    if (f.header.kind != wire::Kind::Hello)
      throw std::runtime_error(std::string("expected a hello frame, got ") + wire::kindName(f.header.kind));
    auto hello = wire::decodeHello(f.payload);
    auto expected = wire::helloProof(cfg_.secret, challenge, hello);
    std::optional<wire::Reject> reject;
    if (!crypto::equalConstantTime(expected.data(), hello.proof.data(), expected.size())) {
      reject = wire::Reject{wire::RejectCode::BadProof, "proof of the secret does not verify"};
    } else if (hello.world != cfg_.worldId || hello.nranks != static_cast<std::uint32_t>(nranks())) {
      reject = wire::Reject{wire::RejectCode::WrongWorld,
                            "peer claims rank " + std::to_string(hello.rank) + " of " +
                                std::to_string(hello.nranks) + " ranks; this world has " +
                                std::to_string(nranks())};
    } else {
      reject = admit(static_cast<int>(hello.rank), hello, remote);
    }
    if (reject) {
      if (reject->code == wire::RejectCode::Simultaneous)
        log::trace(rank(), "kept our own dial to rank {}; refused its dial from {}", hello.rank, remote);
      else
        log::warn(rank(), "refused connection from {} (claims rank {}): {}", remote, hello.rank, reject->reason);
      co_await writeFrame(*sock, wire::Kind::Reject, wire::encode(*reject));
      boost::system::error_code ignored;
      sock->close(ignored);
      co_return;
    }
    admitted = static_cast<int>(hello.rank);
    wire::Welcome welcome{wire::welcomeProof(cfg_.secret, challenge, hello)};
    co_await writeFrame(*sock, wire::Kind::Welcome, wire::encode(welcome));
    if (*watchdog.expired) throw std::runtime_error("handshake deadline passed");
    watchdog.timer.cancel();
    attach(static_cast<int>(hello.rank), std::move(*sock), /*dialedByUs=*/false);
    co_return;
  } catch (const boost::system::system_error& e) {
    failure = *watchdog.expired ? "no complete handshake within " +
                                      std::to_string(cfg_.handshakeTimeout.count()) + " ms"
                                : e.code().message();
  } catch (const std::exception& e) {
    failure = e.what();
  }
  if (!shuttingDown_) log::warn(rank(), "dropped incoming connection from {}: {}", remote, failure);
  boost::system::error_code ignored;
  sock->close(ignored);
  // The link admit() reserved will not come up this way: release its waiters.
  if (admitted >= 0) onDialFailed(admitted, "handshake with rank " + std::to_string(admitted) + " from " + remote +
                                                " failed: " + failure, true);
}

asio::awaitable<void> World::dialPeer(int peer, tcp::endpoint ep, bool retryRefused) {
  auto deadline = Clock::now() + (retryRefused ? cfg_.timeout : cfg_.handshakeTimeout);
  auto backoff = std::chrono::milliseconds(10);
  int attempts = 0;
  for (;;) {
    ++attempts;
    auto sock = std::make_shared<tcp::socket>(io_);
    std::string failure;
    bool retry = false;
    bool peerClosing = false;  // it refused us because its bootstrap is being destroyed
    {
      Watchdog watchdog(io_, sock, std::min(deadline, Clock::now() + cfg_.handshakeTimeout));
      try {
        co_await sock->async_connect(ep, asio::use_awaitable);
        configureSocket(*sock, cfg_);
        auto f = co_await readFrame(*sock, wire::kMaxControlPayload);
        if (f.header.kind == wire::Kind::Reject) throw std::runtime_error(rejectText(wire::decodeReject(f.payload)));
        if (f.header.kind != wire::Kind::Challenge)
          throw std::runtime_error(std::string("expected a challenge frame, got ") + wire::kindName(f.header.kind));
        auto challenge = wire::decodeChallenge(f.payload);
        if (challenge.rank != static_cast<std::uint32_t>(peer))
          throw std::runtime_error("the listener there is rank " + std::to_string(challenge.rank));
        wire::Hello hello;
        hello.rank = static_cast<std::uint32_t>(rank());
        hello.nranks = static_cast<std::uint32_t>(nranks());
        hello.world = cfg_.worldId;
        crypto::randomBytes(hello.nonce.data(), hello.nonce.size());
        hello.proof = wire::helloProof(cfg_.secret, challenge, hello);
        co_await writeFrame(*sock, wire::Kind::Hello, wire::encode(hello));
        auto reply = co_await readFrame(*sock, wire::kMaxControlPayload);
        if (reply.header.kind == wire::Kind::Reject) {
          auto r = wire::decodeReject(reply.payload);
          peerClosing = r.code == wire::RejectCode::ShuttingDown;
          if (r.code == wire::RejectCode::Simultaneous) {
            log::trace(rank(), "rank {} keeps its own connection to us", peer);
            co_return;  // its dial becomes the link
          }
          throw std::runtime_error(rejectText(r));
        }
        if (reply.header.kind != wire::Kind::Welcome)
          throw std::runtime_error(std::string("expected a welcome frame, got ") + wire::kindName(reply.header.kind));
        auto welcome = wire::decodeWelcome(reply.payload);
        auto expected = wire::welcomeProof(cfg_.secret, challenge, hello);
        if (!crypto::equalConstantTime(expected.data(), welcome.proof.data(), expected.size()))
          throw std::runtime_error("the listener could not prove the secret (not a member of this world)");
        if (*watchdog.expired) throw std::runtime_error("handshake deadline passed");
        watchdog.timer.cancel();
        attach(peer, std::move(*sock), /*dialedByUs=*/true);
        co_return;
      } catch (const boost::system::system_error& e) {
        auto code = e.code();
        failure = *watchdog.expired ? "no answer within the handshake deadline" : code.message();
        // A root that is not up yet, or a network that is not yet routable at
        // job start, are worth retrying until the init deadline.
        retry = retryRefused && (code == asio::error::connection_refused || *watchdog.expired ||
                                 code == asio::error::connection_reset || code == asio::error::eof ||
                                 code == asio::error::network_unreachable ||
                                 code == asio::error::host_unreachable || code == asio::error::timed_out);
      } catch (const std::exception& e) {
        failure = e.what();
      }
    }
    if (retry && !shuttingDown_ && !aborted_.load() && Clock::now() + backoff < deadline) {
      log::trace(rank(), "rank {} at {} not ready ({}); retrying in {} ms", peer, toString(ep), failure,
                 backoff.count());
      asio::steady_timer t(io_);
      t.expires_after(backoff);
      co_await t.async_wait(asio::use_awaitable);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
      continue;
    }
    if (retry && !initComplete_) {
      // Retries to the root ran out: the rendezvous timed out; say where the
      // root was supposed to be and what the last attempt got.
      finishInit(std::make_exception_ptr(
          Error(ErrorCode::Timeout,
                fmt::format("rank {}: rendezvous timed out after {} ms: could not reach the root at {} ({} attempts; "
                            "last: {})",
                            rank(), cfg_.timeout.count(), toString(ep), attempts, failure),
                rank(), peer)));
      // Close the link too, so that shutdown does not wait for its queued registration.
      onDialFailed(peer, "cannot connect to rank " + std::to_string(peer) + " at " + toString(ep) + ": " + failure,
                   true);
      co_return;
    }
    // A peer that is closing its bootstrap left in order, as if it had said goodbye.
    if (peerClosing && links_[peer] && links_[peer]->state() == Link::State::Dialing) links_[peer]->markGoodbye();
    onDialFailed(peer, "cannot connect to rank " + std::to_string(peer) + " at " + toString(ep) + ": " + failure,
                 true);
    co_return;
  }
}

}  // namespace tether
