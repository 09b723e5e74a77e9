// A host-local group's leader (host_group_leader.hpp): accept, serve each
// member (handshake, registration, its close or its loss), batch the
// registrations, send the table or the failure.
#include "rendezvous/host_group_leader.hpp"

#include <fmt/format.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "base/crypto.hpp"
#include "base/join.hpp"
#include "base/log.hpp"
#include "rendezvous/host_group_shape.hpp"

namespace tether::rdv::host {

Leader::Leader(asio::io_context& io, HostGroupOptions o, HostGroupEvents e, const PeerAddress& self, int group,
               std::string name, std::shared_ptr<link::UnixListener> listener, bool abandoned)
    : io_(io),
      opts_(std::move(o)),
      events_(std::move(e)),
      self_(self),
      group_(group),
      cap_(capOf(opts_, group)),
      name_(std::move(name)),
      quiet_(io),
      listener_(std::move(listener)),
      abandoned_(abandoned) {}

void Leader::start() {
  ranks_.push_back(opts_.rank);
  if (opts_.rank != 0) pending_.push_back({static_cast<std::uint32_t>(opts_.rank), self_});
  log::trace(opts_.rank, "host-local: this rank leads group {} of its host ({}, {} ranks at most)", group_, name_,
             cap_);
  asio::co_spawn(io_, acceptLoop(shared_from_this()), asio::detached);
  if (events_.leading) events_.leading();
  checkFlush();
}

void Leader::close() {
  if (closed_) return;
  closed_ = true;
  quiet_.cancel();
  listener_->close();
  for (auto& [r, s] : members_) s->close();
  for (Greeting* g : greeting_) g->s->close();
}

std::string Leader::describe() const {
  std::string of = "an unknown number";
  if (opts_.localRanks > 0)
    of = fmt::format(
        "{} expected (TETHER_LOCAL_NRANKS{})", expectedOf(opts_, group_),
        groups(opts_) > 1 ? fmt::format("={} in groups of at most {}", opts_.localRanks, opts_.groupMax) : std::string());
  return fmt::format("this rank leads host-local group {} of its host ({}): ranks {}{} are here, of {}", group_, name_,
                     joined(ranks_, ", "), rootHere_ ? " and 0" : "", of);
}

void Leader::sendTable(wire::SharedBytes table) {
  tableSent_ = true;
  listener_->close();  // every rank is here: the name is free again
  for (auto& [r, s] : members_) asio::co_spawn(io_, writeOne(shared_from_this(), s, Msg::Table, table), asio::detached);
}

void Leader::abandon(ErrorCode code, const std::string& reason, int peer) {
  if (closed_ || abandoned_) return;
  abandoned_ = true;
  quiet_.cancel();
  // Written now, not from the loop: this rank fails and closes the group
  // next, and its members must read why, not only that it closed.
  fail_ = std::make_shared<const Bytes>(encodeCause({code, peer, reason}));
  for (auto& [r, s] : members_) {
    if (writeNow(*s, Msg::Fail, *fail_) == 0)  // nothing fit: from the loop
      asio::co_spawn(io_, writeOne(shared_from_this(), s, Msg::Fail, fail_), asio::detached);
    else
      s->close();  // all of it (part, rarely: the member then reads a lost leader)
  }
  for (Greeting* g : greeting_) {  // those in their handshake: after what they were sent
    if (!g->writing) (void)writeNow(*g->s, Msg::Fail, *fail_);
    g->s->close();
  }
  // The ranks still queued at the socket (not accepted yet: this leader was
  // out of descriptors, or busy) read why as their first message, with the
  // descriptors just freed. A closed queue would reset them, and they would
  // take the name for a leader gone, bind it and lead this group again.
  boost::system::error_code ec;
  while (auto s = listener_->acceptNow(ec)) {
    (void)writeNow(*s, Msg::Fail, *fail_);
    s->close();
  }
  listener_->close();
}

void Leader::checkFlush() {
  if (counted() >= expectedOf(opts_, group_) || (sentOn_ && welcomed_ == 0 && handshaking_ == 0)) {
    quiet_.cancel();
    return flush();
  }
  if (opts_.localRanks > 0) return;
  quiet_.expires_after(opts_.quiet);
  quiet_.async_wait([w = weak_from_this()](const boost::system::error_code& ec) {
    if (auto self = w.lock(); self && !ec) self->flush();
  });
}

void Leader::flush() {
  if (closed_ || abandoned_ || pending_.empty()) return;
  auto batch = std::move(pending_);
  pending_.clear();
  events_.batch(std::move(batch));
}

asio::awaitable<void> Leader::writeOne(std::shared_ptr<Leader> self, std::shared_ptr<link::Stream> s, Msg type,
                                      wire::SharedBytes payload) {
  try {
    co_await writeMsg(*s, type, *payload);
  } catch (const std::exception& e) {
    log::trace(self->opts_.rank, "host-local: write to {} failed: {}", s->peer(), e.what());
  }
  // Its last message: the member reads it, then EOF (a Unix stream delivers
  // what was written before the close), so the descriptor goes at once.
  if (type == Msg::Fail || type == Msg::Table) s->close();
}

asio::awaitable<void> Leader::acceptLoop(std::shared_ptr<Leader> self) {
  log::Repeats failures;
  while (!self->closed_ && !self->abandoned_) {
    std::shared_ptr<link::Stream> s;
    boost::system::error_code ec;
    try {
      s = co_await self->listener_->accept();
    } catch (const boost::system::system_error& e) {
      ec = e.code();
    }
    if (ec == asio::error::operation_aborted || self->closed_ || !self->listener_->isOpen()) co_return;
    if (ec) {  // out of descriptors: one line per cause and 5 s, and a pause, not a busy loop
      int times = 0;
      if (failures.due(ec.message(), times))
        log::warn(self->opts_.rank, "host-local: accept failed: {}; retrying in 100 ms{}", ec.message(),
                  times > 1 ? fmt::format(" ({} times since the last line)", times) : std::string());
      asio::steady_timer t(self->io_, std::chrono::milliseconds(100));
      co_await t.async_wait(asio::use_awaitable);
      continue;
    }
    if (self->admitted() + self->handshaking_ >= self->cap_) {
      self->sentOn_ = true;
      try {
        const Bytes none;
        co_await writeMsg(*s, Msg::Full, none);
      } catch (const boost::system::system_error& e) {  // it left meanwhile
        log::trace(self->opts_.rank, "host-local: answering full failed: {}", e.code().message());
      }
      s->close();
      continue;
    }
    ++self->handshaking_;  // serve() gives the place back
    asio::co_spawn(self->io_, serve(self, std::move(s)), asio::detached);
  }
}

asio::awaitable<void> Leader::serve(std::shared_ptr<Leader> self, std::shared_ptr<link::Stream> s) {
  const auto& o = self->opts_;
  int who = -1;
  std::string reason;
  Place place(*self, self->handshaking_);  // taken by acceptLoop
  Greeting greeting(*self, s);
  asio::steady_timer helloBy(self->io_, o.helloWait);
  helloBy.async_wait([w = std::weak_ptr<link::Stream>(s)](const boost::system::error_code& ec) {
    if (auto stream = w.lock(); stream && !ec) stream->close();  // silent: its place goes to another
  });
  try {
    wire::Challenge c{static_cast<std::uint32_t>(o.rank), {}};
    crypto::randomBytes(c.nonce.data(), c.nonce.size());
    const Bytes challenge = wire::encode(c);
    co_await greeting.write(Msg::Challenge, challenge);
    auto m = co_await readMsg(*s);
    auto& [t, b] = m;
    if (t != Msg::Hello) throw std::invalid_argument("expected a hello");
    helloBy.cancel();
    auto h = wire::decodeHello(b);
    auto want = wire::helloProof(o.secret, c, h);
    std::string refusal;
    wire::RejectCode code{};
    if (!crypto::equalConstantTime(want.data(), h.proof.data(), want.size()))
      refusal = fmt::format("a process claiming rank {} does not know this job's secret", h.rank),
      code = wire::RejectCode::BadProof;
    else if (h.nranks != static_cast<std::uint32_t>(o.nranks) || h.world != o.worldId)
      refusal = fmt::format("rank {} is in another world ({} ranks)", h.rank, h.nranks),
      code = wire::RejectCode::WrongWorld;
    else if (static_cast<int>(h.rank) == o.rank || self->members_.count(static_cast<int>(h.rank)) ||
             (h.rank == 0 && self->rootHere_))
      refusal = fmt::format("two processes claim rank {} on this host", h.rank), code = wire::RejectCode::DuplicateRank;
    if (!refusal.empty()) {
      log::warn(o.rank, "host-local: refused a process on {}: {}", self->name_, refusal);
      const Bytes reject = wire::encode(wire::Reject{code, refusal});
      co_await greeting.write(Msg::Reject, reject);
      s->close();
      if (code == wire::RejectCode::DuplicateRank)
        self->failed(ErrorCode::InvalidArgument, "rendezvous failed: " + refusal, static_cast<int>(h.rank));
      co_return;
    }
    place.move(self->welcomed_);
    const Bytes welcome = wire::encode(wire::Welcome{wire::welcomeProof(o.secret, c, h)});
    co_await greeting.write(Msg::Welcome, welcome);
    auto m2 = co_await readMsg(*s);
    auto& [t2, b2] = m2;
    if (t2 != Msg::Register) throw std::invalid_argument("expected a registration");
    auto r = wire::decodeRegister(b2);
    if (r.rank != h.rank) throw std::invalid_argument("registration for another rank");
    if (self->closed_) co_return;
    if (self->abandoned_) co_return;  // abandon() wrote it the Fail and closed it
    place.release();
    greeting.end();
    who = static_cast<int>(r.rank);
    if (who == 0) {  // the root registers itself; it is only counted here
      self->rootHere_ = true;
      s->close();
      self->checkFlush();
      co_return;
    }
    self->members_.emplace(who, s);
    self->ranks_.push_back(who);
    self->pending_.push_back(r);
    log::trace(o.rank, "host-local: rank {} joined group {} ({} here)", who, self->group_, self->counted());
    self->checkFlush();
    // A member sends nothing more: EOF once it has the table, or Leave
    // (then EOF) when it gives up first.
    auto m3 = co_await readMsg(*s);
    if (m3.first == Msg::Leave) {
      s->close();
      if (self->tableSent_) {  // it gave up as the table went: it has failed, and its peers learn so later
        self->members_.erase(who);
        co_return;
      }
      auto c = decodeCause(m3.second);
      if (self->closed_ || self->abandoned_) co_return;
      if (self->events_.left) co_return self->events_.left(who, c.code, std::move(c.text), c.peer);
      reason = "it left: " + c.text;
    } else {
      reason = "it sent more than a registration";
    }
  } catch (const boost::system::system_error& e) {
    if ((e.code() == asio::error::eof || e.code() == asio::error::operation_aborted) &&
        self->tableSent_) {  // it has the table (closed by writeOne or by it): its socket goes now
      s->close();
      self->members_.erase(who);
      co_return;
    }
    reason = reasonOf(e);
  } catch (const std::exception& e) {
    reason = e.what();
  }
  if (self->closed_ || self->abandoned_) co_return;
  if (who < 0) {
    log::warn(o.rank, "host-local: a connection on {} ended before it registered: {}", self->name_, reason);
    co_return;
  }
  self->failed(ErrorCode::PeerLost,
               fmt::format("rendezvous failed: lost rank {} on this host (the host leader of group {} is rank {}) "
                           "before the table was out: {}",
                           who, self->group_, o.rank, reason),
               who);
}

}  // namespace tether::rdv::host
