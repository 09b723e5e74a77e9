// The connector's accepting side: the accept loop, an incoming handshake
// and its admission (connector.hpp). The dialling side is connector_dial.cpp.
#include "link/connector.hpp"

#include <fmt/format.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <algorithm>
#include <memory>

#include "base/crypto.hpp"
#include "base/log.hpp"
#include "link/frame_io.hpp"
#include "link/handshake_watchdog.hpp"

namespace tether::link {

Connector::Connector(asio::io_context& io, ConnectorConfig config, Admission& admission, std::unique_ptr<Dialer> dialer)
    : io_(io), cfg_(std::move(config)), admission_(admission), dialer_(std::move(dialer)), acceptPaused_(io) {}

void Connector::listen(std::shared_ptr<Listener> listener) {
  asio::co_spawn(io_, acceptLoop(std::move(listener)), asio::detached);
}

asio::awaitable<void> Connector::acceptLoop(std::shared_ptr<Listener> listener) {
  log::Repeats failures;
  for (;;) {
    boost::system::error_code ec;
    std::shared_ptr<Stream> s;
    try {
      s = co_await listener->accept();
    } catch (const boost::system::system_error& e) {
      ec = e.code();
    }
    if (!listener->isOpen()) co_return;
    if (ec) {
      // Out of descriptors and similar: say so (once per cause and 5 s), back off, keep serving.
      int times = 0;
      if (failures.due(ec.message(), times))
        log::warn(cfg_.rank, "accept failed: {}; retrying in 100 ms{}", ec.message(),
                  times > 1 ? fmt::format(" ({} times since the last line)", times) : std::string());
      asio::steady_timer t(io_);
      t.expires_after(std::chrono::milliseconds(100));
      co_await t.async_wait(asio::use_awaitable);
      continue;
    }
    ++handshakes_;
    asio::co_spawn(io_, serveIncoming(std::move(s)), [this](std::exception_ptr) {
      if (handshakes_-- >= cfg_.maxHandshakes) acceptPaused_.cancel();
    });
    if (handshakes_ >= std::max(1, cfg_.maxHandshakes)) {
      // Many peers at once (a large world registering with its root): the
      // rest wait in the kernel's backlog instead of each costing a socket here.
      acceptPaused_.expires_at(Clock::time_point::max());
      boost::system::error_code ignored;
      co_await acceptPaused_.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
    }
  }
}

asio::awaitable<void> Connector::serveIncoming(std::shared_ptr<Stream> sock) {
  const std::string remote = sock->peer();
  const auto deadline = Clock::now() + cfg_.handshakeTimeout;
  Watchdog watchdog(io_, sock, deadline);
  std::string failure;
  int admitted = -1;  // the rank whose link this connection is to become
  std::uint32_t admittedEpoch = 0;
  try {
    wire::Challenge challenge;
    challenge.rank = static_cast<std::uint32_t>(cfg_.rank);
    crypto::randomBytes(challenge.nonce.data(), challenge.nonce.size());
    co_await writeFrame(*sock, wire::Kind::Challenge, wire::encode(challenge));
    auto f = co_await readFrame(*sock, wire::kMaxControlPayload);
    if (f.header.kind != wire::Kind::Hello)
      throw std::runtime_error(std::string("expected a hello frame, got ") + wire::kindName(f.header.kind));
    auto hello = wire::decodeHello(f.payload);
    auto expected = wire::helloProof(cfg_.secret, challenge, hello);
    // An observer (tether-status) proves the secret and the world, not a size.
    const bool observer = hello.rank == wire::kObserverRank;
    std::optional<wire::Reject> reject;
    if (!crypto::equalConstantTime(expected.data(), hello.proof.data(), expected.size())) {
      reject = wire::Reject{wire::RejectCode::BadProof, "proof of the secret does not verify"};
    } else if (hello.world != cfg_.worldId ||
               (!observer && hello.nranks != static_cast<std::uint32_t>(cfg_.nranks))) {
      reject = wire::Reject{
          wire::RejectCode::WrongWorld,
          fmt::format("peer claims rank {} of {} ranks; this world has {}", hello.rank, hello.nranks, cfg_.nranks)};
    } else if (observer && admission_.closing()) {
      reject = wire::Reject{wire::RejectCode::ShuttingDown, "it closes its bootstrap"};
    }
    if (reject && !observer)
      admission_.refused(Refusal{static_cast<int>(hello.rank), reject->code, remote, reject->reason});
    else if (!reject && !observer) {
      // Admission may hold the hello until the deadline (R4); then it is
      // answered, not cut: the dialer, alive and answering, must not read
      // EOF and take us for lost. The answer gets one more deadline.
      watchdog.extend(deadline + cfg_.handshakeTimeout);
      reject = co_await admit(hello, remote, deadline, [&watchdog] { return watchdog.expired(); });
    }
    if (reject) {
      if (reject->code == wire::RejectCode::Simultaneous || reject->code == wire::RejectCode::Stale)
        log::trace(cfg_.rank, "kept our own dial to rank {}; refused its dial from {}", hello.rank, remote);
      else if (reject->code == wire::RejectCode::Retry)
        log::info(cfg_.rank, "told rank {} at {} to dial again: {}", hello.rank, remote, reject->reason);
      else if (observer)
        log::warn(cfg_.rank, "refused an observer from {}: {}", remote, reject->reason);
      else if (reject->code == wire::RejectCode::ShuttingDown)  // R7: part of an orderly close; the dialer is told
        log::info(cfg_.rank, "refused connection from {} (claims rank {}): {}", remote, hello.rank, reject->reason);
      else
        log::warn(cfg_.rank, "refused connection from {} (claims rank {}): {}", remote, hello.rank, reject->reason);
      co_await writeFrame(*sock, wire::Kind::Reject, wire::encode(*reject));
      sock->close();
      co_return;
    }
    if (!observer) {
      admitted = static_cast<int>(hello.rank);
      admittedEpoch = hello.epoch;
    }
    // Welcomed (a link is reserved for it): from here on the dialer may get
    // our welcome and attach, so the deadline can no longer cut this stream
    // (the dialer would see a healthy rank close its link without a goodbye).
    // Admission ran in this handler, after the last look at the deadline.
    watchdog.disarm();
    wire::Welcome welcome{wire::welcomeProof(cfg_.secret, challenge, hello)};
    co_await writeFrame(*sock, wire::Kind::Welcome, wire::encode(welcome));
    if (observer)
      admission_.observer(std::move(sock));
    else
      admission_.connected(admitted, hello.epoch, std::move(sock), /*dialedByUs=*/false);
    co_return;
  } catch (const boost::system::system_error& e) {
    failure = watchdog.expired() ? fmt::format("no complete handshake within {} ms", cfg_.handshakeTimeout.count())
                                 : e.code().message();
  } catch (const std::exception& e) {
    failure = e.what();
  }
  if (!admission_.closing()) log::warn(cfg_.rank, "dropped incoming connection from {}: {}", remote, failure);
  sock->close();
  // The link admit() reserved will not come up this way: release its waiters.
  if (admitted >= 0) {
    ConnectFailure f;
    f.dialed = false;
    f.reason = fmt::format("handshake with rank {} from {} failed: {}", admitted, remote, failure);
    admission_.connectFailed(admitted, admittedEpoch, f);
  }
}

// Admission of an authenticated hello; nullopt welcomes it. Never once the
// watchdog has closed the stream (`expired`), so no link is reserved for a
// connection that cannot carry it.
asio::awaitable<std::optional<wire::Reject>> Connector::admit(const wire::Hello& hello, const std::string& remote,
                                                              Clock::time_point deadline,
                                                              std::function<bool()> expired) {
  for (;;) {
    if (expired()) throw std::runtime_error("handshake deadline passed");
    auto verdict = admission_.admit(static_cast<int>(hello.rank), hello.epoch, remote);
    if (verdict.kind == Verdict::Kind::Reject) co_return verdict.reject;
    if (verdict.kind == Verdict::Kind::Welcome) co_return std::nullopt;
    // R4: the peer's previous connection still lingers here; its last
    // frames must be read before anything on this one. Held until the
    // handshake's deadline at most; then the dialer is told to dial again.
    if (Clock::now() >= deadline)
      co_return wire::Reject{wire::RejectCode::Retry,
                             fmt::format("rank {}'s previous connection to rank {} did not close within {} ms",
                                         hello.rank, cfg_.rank, cfg_.handshakeTimeout.count())};
    co_await admission_.predecessorClosed(static_cast<int>(hello.rank), deadline);
  }
}

}  // namespace tether::link
