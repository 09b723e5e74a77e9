// The connector's dialling side: a dial, its attempts and their retries,
// and a reject in words (connector.hpp). The accepting side is connector.cpp.
#include <fmt/format.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <algorithm>
#include <memory>

#include "base/crypto.hpp"
#include "base/log.hpp"
#include "link/connector.hpp"
#include "link/frame_io.hpp"
#include "link/handshake_watchdog.hpp"

namespace tether::link {
namespace {

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

asio::awaitable<bool> Connector::dialOnce(const Dial& d, Clock::time_point deadline, ConnectFailure& failure,
                                          bool& retriable) {
  const int peer = d.peer;
  auto sock = dialer_->open();
  bool connected = false;  // its listener queued us
  bool answered = false;   // the peer's challenge came: its process is there and answering
  Watchdog watchdog(io_, sock, std::min(deadline, Clock::now() + cfg_.handshakeTimeout));
  try {
    co_await sock->connect(d.ep);
    connected = true;
    // Connected: the peer's listener has queued us. A busy peer (its accepts
    // paused, many handshakes at once) sends its challenge late; cutting at
    // the handshake deadline and dialling again would only put us at the back
    // of its queue and leave it a dead connection to drop (at 1,024 ranks,
    // hundreds of "dropped incoming connection ... End of file" at once). A
    // dead peer's kernel resets us at once; a frozen one is the call's Timeout.
    watchdog.extend(deadline);
    auto f = co_await readFrame(*sock, wire::kMaxControlPayload);
    if (f.header.kind == wire::Kind::Reject) throw std::runtime_error(rejectText(wire::decodeReject(f.payload)));
    if (f.header.kind != wire::Kind::Challenge)
      throw std::runtime_error(std::string("expected a challenge frame, got ") + wire::kindName(f.header.kind));
    auto challenge = wire::decodeChallenge(f.payload);
    if (challenge.rank != static_cast<std::uint32_t>(peer))
      throw std::runtime_error(fmt::format("the listener there is rank {}", challenge.rank));
    answered = true;
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
    failure.reason = !watchdog.expired() ? e.code().message()
                     : connected ? "connected, but no answer by the dial's deadline (stopped, or not making progress)"
                                 : "not connected within the handshake deadline";
    // A stream cut after the peer's challenge came is a busy peer (its own
    // handshake deadline passed first), not a lost one: retried until the
    // dial's deadline. A peer that is gone refuses the next attempt.
    const bool cut = e.code() == asio::error::eof || e.code() == asio::error::connection_reset;
    retriable = transient(e.code(), watchdog.expired(), d.policy) || (answered && cut);
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
