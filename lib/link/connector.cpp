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

namespace tether::link {
namespace {

// Closes the stream when the deadline passes; shares ownership so a late
// timer callback never touches a destroyed stream.
struct Watchdog {
  struct Flags {
    bool expired = false;
    unsigned armed = 0;  // which arming may still close the stream (0: none)
  };
  Watchdog(asio::io_context& io, std::shared_ptr<Stream> s, Clock::time_point deadline)
      : timer(io), stream(std::move(s)), flags(std::make_shared<Flags>()) {
    arm(deadline);
  }
  ~Watchdog() { timer.cancel(); }
  bool expired() const { return flags->expired; }
  // Moves the deadline (unless it has passed already). A callback of the
  // earlier arming that is already queued (too late to cancel) does nothing.
  void extend(Clock::time_point deadline) {
    if (!flags->expired) arm(deadline);
  }
  // The handshake is done (or committed): the stream goes to a link, and a
  // deadline whose callback is already queued must not close it.
  void disarm() {
    flags->armed = 0;
    timer.cancel();
  }
  void arm(Clock::time_point deadline) {
    const unsigned arming = ++generation;
    flags->armed = arming;
    timer.expires_at(deadline);
    timer.async_wait([s = stream, f = flags, arming](boost::system::error_code ec) {
      if (ec || f->armed != arming) return;
      f->expired = true;
      s->close();
    });
  }
  asio::steady_timer timer;
  std::shared_ptr<Stream> stream;
  std::shared_ptr<Flags> flags;
  unsigned generation = 0;
};


// Errors worth another attempt: a host too busy to finish the handshake in
// time, a full backlog, a network not yet routable at job start; and, for a
// root that is not listening yet, a refusal.
bool transient(const boost::system::error_code& code, bool expired, const DialPolicy& policy) {
  if (code == asio::error::connection_refused) return policy.retryRefused;
  if (code == asio::error::connection_reset || code == asio::error::eof)
    return policy.retryRefused || Clock::now() < policy.brokenUntil;
  return expired || code == asio::error::network_unreachable || code == asio::error::host_unreachable ||
         code == asio::error::timed_out;
}

}  // namespace

std::string rejectText(const wire::Reject& r) {
  switch (r.code) {
    case wire::RejectCode::BadProof:
      return "rejected our proof of the secret (wrong UniqueId, or another job's root at this address?): " + r.reason;
    case wire::RejectCode::WrongWorld:
      return "rejected us as a member of another world: " + r.reason;
    case wire::RejectCode::DuplicateRank:
      return "rejected us as a duplicate rank: " + r.reason;
    case wire::RejectCode::BadRank:
      return "rejected our rank: " + r.reason;
    case wire::RejectCode::ShuttingDown:
      return "is shutting down: " + r.reason;
    case wire::RejectCode::Simultaneous:
      return "kept its own connection: " + r.reason;
    case wire::RejectCode::Stale:
      return "has closed the connection this dial was for: " + r.reason;
    case wire::RejectCode::NotJoined:
      return "has not joined its world yet: " + r.reason;
    case wire::RejectCode::Retry:
      return "held our hello past its handshake deadline, our previous connection there still closing; dial again: " +
             r.reason;
  }
  return "rejected the connection: " + r.reason;
}

Connector::Connector(asio::io_context& io, ConnectorConfig config, Admission& admission, std::unique_ptr<Dialer> dialer)
    : io_(io), cfg_(std::move(config)), admission_(admission), dialer_(std::move(dialer)), acceptPaused_(io) {}

void Connector::listen(std::shared_ptr<Listener> listener) {
  asio::co_spawn(io_, acceptLoop(std::move(listener)), asio::detached);
}

void Connector::dial(int peer, std::uint32_t epoch, Endpoint ep, DialPolicy policy) {
  Dial d{peer, epoch, std::move(ep), policy};
  if (dialsInFlight_ >= std::max(1, cfg_.maxDials)) {
    dialQueue_.push_back(d);
    return;
  }
  ++dialsInFlight_;
  asio::co_spawn(io_, dialPeer(d), asio::detached);
}

std::string Connector::retrying(int peer) const {
  auto it = retrying_.find(peer);
  return it == retrying_.end() ? std::string() : it->second;
}

void Connector::dialEnded() {
  --dialsInFlight_;
  if (dialQueue_.empty()) return;
  Dial next = dialQueue_.front();
  dialQueue_.pop_front();
  ++dialsInFlight_;
  asio::co_spawn(io_, dialPeer(next), asio::detached);
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

asio::awaitable<bool> Connector::dialOnce(const Dial& d, Clock::time_point deadline, ConnectFailure& failure,
                                          bool& retriable) {
  const int peer = d.peer;
  auto sock = dialer_->open();
  Watchdog watchdog(io_, sock, std::min(deadline, Clock::now() + cfg_.handshakeTimeout));
  try {
    co_await sock->connect(d.ep);
    auto f = co_await readFrame(*sock, wire::kMaxControlPayload);
    if (f.header.kind == wire::Kind::Reject) throw std::runtime_error(rejectText(wire::decodeReject(f.payload)));
    if (f.header.kind != wire::Kind::Challenge)
      throw std::runtime_error(std::string("expected a challenge frame, got ") + wire::kindName(f.header.kind));
    auto challenge = wire::decodeChallenge(f.payload);
    if (challenge.rank != static_cast<std::uint32_t>(peer))
      throw std::runtime_error(fmt::format("the listener there is rank {}", challenge.rank));
    wire::Hello hello;
    hello.rank = static_cast<std::uint32_t>(cfg_.rank);
    hello.nranks = static_cast<std::uint32_t>(cfg_.nranks);
    hello.world = cfg_.worldId;
    hello.epoch = d.epoch;
    crypto::randomBytes(hello.nonce.data(), hello.nonce.size());
    hello.proof = wire::helloProof(cfg_.secret, challenge, hello);
    // Once the hello may have left, the peer may welcome it and attach the
    // stream as its link at any moment (after holding it for its predecessor,
    // R4): if the handshake deadline cut it after that, the peer would read
    // EOF on a link of a healthy rank and report it lost. So from before the
    // hello is written (its write can end after the deadline on a loaded
    // host, the bytes long gone) the answer is awaited until the dial's own
    // deadline (past the call's); the peer answers, refuses or closes by its
    // own handshake deadline, and a frozen peer is the call's Timeout.
    if (watchdog.expired()) throw boost::system::system_error(asio::error::timed_out);
    watchdog.extend(deadline);
    co_await writeFrame(*sock, wire::Kind::Hello, wire::encode(hello));
    auto reply = co_await readFrame(*sock, wire::kMaxControlPayload);
    if (reply.header.kind == wire::Kind::Reject) {
      auto r = wire::decodeReject(reply.payload);
      failure.peerClosing = r.code == wire::RejectCode::ShuttingDown;
      failure.refused = true;
      if (r.code == wire::RejectCode::Simultaneous) {
        log::trace(cfg_.rank, "rank {} keeps its own connection to us", peer);
        co_return true;  // its dial becomes the link
      }
      if (r.code == wire::RejectCode::Retry) {
        // The peer is alive and answering: it held our hello for our previous
        // connection there (R4) past its handshake deadline. Dial again, with
        // backoff, until the dial's deadline (not only the window for streams
        // cut without an answer): the peer is not lost.
        failure.refused = false;
        failure.reason = rejectText(r);
        retriable = true;
        co_return false;
      }
      if (r.code == wire::RejectCode::Stale) {
        log::trace(cfg_.rank, "rank {} refused our dial of connection {} as stale", peer, d.epoch);
        // Dialled for a link that has been closed since: nothing to do. But if
        // our link still waits for this dial, the listener there is not the
        // peer we know — an earlier world at the same address, still draining
        // (a re-initialised world at a fixed root): retry until the new one
        // answers or the deadline passes.
        if (!admission_.stillDialing(peer, d.epoch)) co_return true;
        failure.refused = false;
        failure.reason = rejectText(r) + " (an earlier process at this address still closing?)";
        retriable = true;
        co_return false;
      }
      throw std::runtime_error(rejectText(r));
    }
    if (reply.header.kind != wire::Kind::Welcome)
      throw std::runtime_error(std::string("expected a welcome frame, got ") + wire::kindName(reply.header.kind));
    auto welcome = wire::decodeWelcome(reply.payload);
    auto expected = wire::welcomeProof(cfg_.secret, challenge, hello);
    if (!crypto::equalConstantTime(expected.data(), welcome.proof.data(), expected.size()))
      throw std::runtime_error("the listener could not prove the secret (not a member of this world)");
    if (watchdog.expired()) throw std::runtime_error("handshake deadline passed");
    watchdog.disarm();
    admission_.connected(peer, d.epoch, std::move(sock), /*dialedByUs=*/true);
    co_return true;
  } catch (const boost::system::system_error& e) {
    failure.reason = watchdog.expired() ? "no answer within the handshake deadline" : e.code().message();
    retriable = transient(e.code(), watchdog.expired(), d.policy);
  } catch (const std::exception& e) {
    failure.reason = e.what();
  }
  co_return false;
}

asio::awaitable<void> Connector::dialPeer(Dial d) {
  const auto deadline = d.policy.until;
  auto backoff = std::chrono::milliseconds(10);
  ConnectFailure failure;
  std::uint64_t jitter = static_cast<std::uint64_t>(Clock::now().time_since_epoch().count()) ^
                         (static_cast<std::uint64_t>(cfg_.rank) << 32) ^ static_cast<std::uint64_t>(d.peer);
  for (failure.attempts = 1;; ++failure.attempts) {
    bool retriable = false;
    if (co_await dialOnce(d, deadline, failure, retriable)) {
      retrying_.erase(d.peer);
      dialEnded();
      co_return;
    }
    if (!retriable) break;
    // Jitter (up to half the backoff) keeps a thousand ranks that start
    // together from retrying in lockstep.
    jitter = jitter * 6364136223846793005ULL + 1442695040888963407ULL;
    auto wait = backoff + std::chrono::milliseconds((jitter >> 33) % (backoff.count() / 2 + 1));
    // A deadline means the full time: near it the waits shrink (half of what
    // is left, at least 5 ms), so a root that comes up in the last moments is
    // still tried; the dial gives up only once the deadline has passed.
    const auto now = Clock::now();
    if (!admission_.mayRetry() || now >= deadline) {
      failure.retriesExhausted = true;
      break;
    }
    if (now + wait >= deadline)
      wait = std::max(std::chrono::milliseconds(5),
                      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now) / 2);
    retrying_[d.peer] = fmt::format("{} attempts; last: {}", failure.attempts, failure.reason);
    if (failure.attempts == 1)
      log::info(cfg_.rank, "rank {} at {} not reachable yet ({}); retrying", d.peer, d.ep.address, failure.reason);
    asio::steady_timer t(io_);
    t.expires_after(wait);
    co_await t.async_wait(asio::use_awaitable);
    if (Clock::now() >= deadline) {
      failure.retriesExhausted = true;
      break;
    }
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
  failure.reason = fmt::format("cannot connect to rank {} at {}: {}", d.peer, d.ep.address, failure.reason);
  retrying_.erase(d.peer);
  dialEnded();
  admission_.connectFailed(d.peer, d.epoch, failure);
}

}  // namespace tether::link
