// A host-local group's member (host_group_member.hpp): prove the secret both
// ways, register, and wait for the table or the leader's cause; a full group
// or one that did not answer yet goes back to the entry.
#include "rendezvous/host_group_member.hpp"

#include <fmt/format.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "base/crypto.hpp"
#include "rendezvous/host_message.hpp"

namespace tether::rdv::host {

void Member::start() { asio::co_spawn(io_, join(shared_from_this()), asio::detached); }

std::string Member::describe(int group, int leaderRank, const std::string& name) {
  if (leaderRank >= 0)
    return fmt::format("registered with the host leader of group {} (rank {}, {}), which has not sent the table",
                       group, leaderRank, name);
  return fmt::format("could not join the host leader at {}", name);
}

void Member::close() {
  if (closed_) return;
  closed_ = true;
  if (stream_) stream_->close();
}

// A member registered with its leader and still waiting for the table ends
// its rendezvous for a cause of its own: the leader reads why (Leave), then
// EOF. Written now, as the leader's Fail is (one small message fits an
// empty socket buffer; part of it reads as a lost member, as a close does).
void Member::abandon(ErrorCode code, const std::string& reason, int peer) {
  if (closed_ || abandoned_) return;
  abandoned_ = true;
  if (!awaitingTable_) return;
  awaitingTable_ = false;
  writeNow(*stream_, Msg::Leave, encodeCause({code, peer, reason}));
  stream_->close();
}

// A leader that failed wrote its Fail and closed, maybe before this
// rank's next message: that write fails (EPIPE), and the read that follows
// finds the Fail (or the leader's close, reported as such).
asio::awaitable<bool> Member::writeTold(link::Stream& s, Msg type, const Bytes& payload) {
  try {
    co_await writeMsg(s, type, payload);
    co_return true;
  } catch (const boost::system::system_error&) {
    co_return false;
  }
}

void Member::leaderFailed(const Bytes& fail, int leaderRank) {
  auto cause = decodeCause(fail);
  const std::string at = leaderRank < 0 ? fmt::format("group {} ({}) before it answered this rank", group_, name_)
                                        : fmt::format("group {} (rank {})", group_, leaderRank);
  failed(cause.code, fmt::format("rendezvous failed at the host leader of {}: {}", at, cause.text), cause.peer);
}

asio::awaitable<void> Member::again(std::shared_ptr<Member> self) {
  self->stream_->close();
  asio::steady_timer t(self->io_, std::chrono::milliseconds(10));
  co_await t.async_wait(asio::use_awaitable);
  if (!self->closed_) self->next_.again();
}

bool Member::retryable(const boost::system::error_code& ec) {
  const bool transient = ec == asio::error::connection_refused || ec == asio::error::eof ||
                         ec == asio::error::connection_reset || ec == asio::error::broken_pipe;
  return transient && ++attempts_ < 100;
}

asio::awaitable<void> Member::join(std::shared_ptr<Member> self) {
  const auto& o = self->opts_;
  link::UnixDialer dialer(self->io_);
  auto s = dialer.open();
  self->stream_ = s;
  std::string reason;
  try {
    std::pair<Msg, Bytes> first;
    bool retry = false;
    try {
      const link::Endpoint at{"unix", self->name_};
      co_await s->connect(at);
      first = co_await readMsg(*s);
    } catch (const boost::system::system_error& e) {
      if (!self->retryable(e.code())) throw;
      retry = true;
    }
    if (retry) co_return co_await again(self);
    if (self->closed_) co_return;
    auto& [t, b] = first;
    if (t == Msg::Full) {  // the next group, from the entry
      s->close();
      co_return self->next_.full();
    }
    if (t == Msg::Fail) {  // the leader failed before it served this rank: its cause
      s->close();
      co_return self->leaderFailed(b, -1);
    }
    if (t != Msg::Challenge) throw std::invalid_argument("expected a challenge");
    auto c = wire::decodeChallenge(b);
    wire::Hello h{static_cast<std::uint32_t>(o.rank), static_cast<std::uint32_t>(o.nranks), o.worldId, 0, {}, {}};
    crypto::randomBytes(h.nonce.data(), h.nonce.size());
    h.proof = wire::helloProof(o.secret, c, h);
    const Bytes hello = wire::encode(h);
    std::pair<Msg, Bytes> m2;
    co_await writeTold(*s, Msg::Hello, hello);
    try {
      m2 = co_await readMsg(*s);
    } catch (const boost::system::system_error& e) {
      if (!self->retryable(e.code())) throw;
      retry = true;  // closed before the welcome: it gave our place away (too slow an answer)
    }
    if (retry) co_return co_await again(self);
    auto& [t2, b2] = m2;
    if (self->closed_) co_return;
    if (t2 == Msg::Fail) {  // the leader failed during this rank's handshake
      s->close();
      co_return self->leaderFailed(b2, static_cast<int>(c.rank));
    }
    if (t2 == Msg::Reject) {
      auto rj = wire::decodeReject(b2);
      s->close();
      co_return self->failed(ErrorCode::InvalidArgument,
                             fmt::format("rendezvous: refused by the host leader of group {} (rank {}) at {}: {}",
                                         self->group_, c.rank, self->name_, rj.reason),
                             static_cast<int>(c.rank));
    }
    if (t2 != Msg::Welcome) throw std::invalid_argument("expected a welcome");
    auto w = wire::decodeWelcome(b2);
    auto want = wire::welcomeProof(o.secret, c, h);
    if (!crypto::equalConstantTime(want.data(), w.proof.data(), want.size())) {
      s->close();
      co_return self->failed(ErrorCode::InvalidArgument,
                             fmt::format("rendezvous: the host-local socket {} is held by a process that does not "
                                         "know this job's secret (it claims rank {}): refused",
                                         self->name_, c.rank),
                             -1);
    }
    self->leaderRank_ = static_cast<int>(c.rank);
    const Bytes reg = wire::encode(wire::Register{static_cast<std::uint32_t>(o.rank), self->self_});
    const bool registered = co_await writeTold(*s, Msg::Register, reg);
    if (registered && !self->closed_ && self->events_.joined) self->events_.joined();
    if (o.rank == 0 && registered) {  // counted by the leader; the root needs no table
      s->close();
      co_return;
    }
    self->awaitingTable_ = !self->closed_ && !self->abandoned_;
    auto m3 = co_await readMsg(*s);
    self->awaitingTable_ = false;
    auto& [t3, b3] = m3;
    s->close();
    if (self->closed_) co_return;
    if (t3 == Msg::Table) {
      self->closed_ = true;  // nothing more to report
      co_return self->events_.table(std::make_shared<const Bytes>(std::move(b3)));
    }
    if (t3 == Msg::Fail) co_return self->leaderFailed(b3, self->leaderRank_);  // its code and the peer it names
    throw std::invalid_argument("unexpected host-local message");
  } catch (const boost::system::system_error& e) {
    reason = reasonOf(e);
  } catch (const std::exception& e) {
    reason = e.what();
  }
  self->awaitingTable_ = false;
  if (self->closed_) co_return;
  if (self->leaderRank_ < 0)
    self->failed(ErrorCode::PeerLost,
                 fmt::format("rendezvous: cannot join the host leader at {}: {}", self->name_, reason), -1);
  else
    self->failed(ErrorCode::PeerLost,
                 fmt::format("rendezvous: lost the host leader of group {} (rank {}) before the table arrived: {}",
                             self->group_, self->leaderRank_, reason),
                 self->leaderRank_);
}

}  // namespace tether::rdv::host
