#include "rendezvous/host_group.hpp"

#include <fmt/format.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <algorithm>
#include <map>

#include "base/crypto.hpp"
#include "base/join.hpp"
#include "base/log.hpp"
#include "link/unix_stream.hpp"
#include "rendezvous/host_message.hpp"

namespace tether::rdv {
namespace {

using namespace host;

class Group final : public HostGroup, public std::enable_shared_from_this<Group> {
 public:
  Group(asio::io_context& io, HostGroupOptions o, HostGroupEvents e, const PeerAddress& self)
      : io_(io), opts_(std::move(o)), events_(std::move(e)), self_(self), quiet_(io) {}

  void begin() {
    if (closed_) return;
    group_ = groupAt(probe_);
    name_ = groupSocketName(opts_.socket, group_);
    cap_ = capOf(group_);
    boost::system::error_code ec;
    listener_ = link::UnixListener::open(io_, name_, ec);
    if (listener_) {
      leader_ = true;
      ranks_.push_back(opts_.rank);
      if (opts_.rank != 0) pending_.push_back({static_cast<std::uint32_t>(opts_.rank), self_});
      log::trace(opts_.rank, "host-local: this rank leads group {} of its host ({}, {} ranks at most)", group_, name_,
                 cap_);
      asio::co_spawn(io_, acceptLoop(shared_from_this()), asio::detached);
      if (events_.leading) events_.leading();
      checkFlush();
      return;
    }
    if (ec != asio::error::address_in_use)
      return failed(ErrorCode::System,
                    fmt::format("rendezvous: cannot bind the host-local socket {}: {}", name_, ec.message()), -1);
    asio::co_spawn(io_, join(shared_from_this()), asio::detached);
  }

  bool leader() const override { return leader_; }
  int leaderRank() const override { return leaderRank_; }
  int group() const override { return group_; }
  std::vector<int> ranks() const override { return ranks_; }

  void sendTable(wire::SharedBytes table) override {
    tableSent_ = true;
    if (listener_) listener_->close();  // every rank is here: the name is free again
    for (auto& [r, s] : members_)
      asio::co_spawn(io_, writeOne(shared_from_this(), s, Msg::Table, table), asio::detached);
  }

  void abandon(ErrorCode code, const std::string& reason, int peer) override {
    if (closed_ || abandoned_) return;
    if (!leader_) return leave(code, reason, peer);
    abandoned_ = true;
    quiet_.cancel();
    if (listener_) listener_->close();
    // Written now, not from the loop: this rank fails and closes the group
    // next, and its members must read why, not only that it closed.
    fail_ = std::make_shared<const Bytes>(encodeCause({code, peer, reason}));
    for (auto& [r, s] : members_) {
      if (writeNow(*s, Msg::Fail, *fail_) == 0)  // nothing fit: from the loop
        asio::co_spawn(io_, writeOne(shared_from_this(), s, Msg::Fail, fail_), asio::detached);
      else
        s->close();  // all of it (part, rarely: the member then reads a lost leader)
    }
  }

  void close() override {
    if (closed_) return;
    closed_ = true;
    quiet_.cancel();
    if (listener_) listener_->close();
    for (auto& [r, s] : members_) s->close();
    if (stream_) stream_->close();
  }

  std::string describe() const override {
    if (leader_) {
      std::string of = "an unknown number";
      if (opts_.localRanks > 0)
        of = fmt::format("{} expected (TETHER_LOCAL_NRANKS{})", expectedOf(group_),
                         groups() > 1 ? fmt::format("={} in groups of at most {}", opts_.localRanks, opts_.groupMax)
                                      : std::string());
      return fmt::format("this rank leads host-local group {} of its host ({}): ranks {}{} are here, of {}", group_,
                         name_, joined(ranks_, ", "), rootHere_ ? " and 0" : "", of);
    }
    if (leaderRank_ >= 0)
      return fmt::format("registered with the host leader of group {} (rank {}, {}), which has not sent the table",
                         group_, leaderRank_, name_);
    return fmt::format("could not join the host leader at {}", name_);
  }

 private:
  void failed(ErrorCode code, std::string what, int peer) {
    if (closed_ || abandoned_) return;
    if (events_.failed) events_.failed(code, std::move(what), peer);
  }

  // A member registered with its leader and still waiting for the table ends
  // its rendezvous for a cause of its own: the leader reads why (Leave), then
  // EOF. Written now, as the leader's Fail is (one small message fits an
  // empty socket buffer; part of it reads as a lost member, as a close does).
  void leave(ErrorCode code, const std::string& reason, int peer) {
    abandoned_ = true;
    if (!awaitingTable_) return;
    awaitingTable_ = false;
    writeNow(*stream_, Msg::Leave, encodeCause({code, peer, reason}));
    stream_->close();
  }

  int counted() const { return static_cast<int>(ranks_.size()) + (rootHere_ ? 1 : 0); }
  // Counted, and welcomed but not registered yet: a full group answers Full.
  int admitted() const { return counted() + welcomed_; }

  // With a known host size L, groups 0..G-1 (G = ceil(L / groupMax)) hold L
  // ranks: group j min(groupMax, L - j * groupMax). A rank tries them from
  // its own ((rank mod L) / groupMax: one try each when a host's ranks are
  // numbered in a block), cyclically, then groups G, G+1, ... (more ranks than
  // L came). Unknown L: groups 0, 1, 2, ... of groupMax each.
  int groups() const { return opts_.localRanks > 0 ? (opts_.localRanks + opts_.groupMax - 1) / opts_.groupMax : 0; }
  int groupAt(int probe) const {
    const int g = groups();
    if (probe >= g) return probe;
    const int first = (opts_.rank % opts_.localRanks) / opts_.groupMax;
    return (first + probe) % g;
  }
  int capOf(int group) const {
    return group < groups() ? std::min(opts_.groupMax, opts_.localRanks - group * opts_.groupMax) : opts_.groupMax;
  }
  // How many ranks make a batch: all of a known group; past a known host's
  // groups, each rank (the count was too small); unknown L: a full group.
  int expectedOf(int group) const {
    if (opts_.localRanks > 0) return group < groups() ? capOf(group) : 1;
    return opts_.groupMax;
  }

  // A group's batch goes when it has its expected ranks; unknown host size:
  // also once no rank arrived for `quiet` (then one per later batch).
  // A group that sent a rank on and then lost a place (a stranger refused,
  // a rank gone before it registered) flushes what it has, and each later rank.
  void checkFlush() {
    if (counted() >= expectedOf(group_) || (sentOn_ && welcomed_ == 0 && handshaking_ == 0)) {
      quiet_.cancel();
      return flush();
    }
    if (opts_.localRanks > 0) return;
    quiet_.expires_after(opts_.quiet);
    quiet_.async_wait([w = weak_from_this()](const boost::system::error_code& ec) {
      if (auto self = w.lock(); self && !ec) self->flush();
    });
  }

  void flush() {
    if (closed_ || abandoned_ || pending_.empty()) return;
    auto batch = std::move(pending_);
    pending_.clear();
    events_.batch(std::move(batch));
  }

  static asio::awaitable<void> writeOne(std::shared_ptr<Group> self, std::shared_ptr<link::Stream> s, Msg type,
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

  // A full group (its places taken: ranks counted, welcomed or in their
  // handshake) answers Full here, one connection at a time, so a leader
  // holds at most its group's places, the listener and the one it answers.
  static asio::awaitable<void> acceptLoop(std::shared_ptr<Group> self) {
    while (!self->closed_ && !self->abandoned_) {
      bool pause = false;
      try {
        auto s = co_await self->listener_->accept();
        if (self->admitted() + self->handshaking_ >= self->cap_) {
          self->sentOn_ = true;
          const Bytes none;
          co_await writeMsg(*s, Msg::Full, none);
          s->close();
          continue;
        }
        ++self->handshaking_;  // serve() gives the place back
        asio::co_spawn(self->io_, serve(self, std::move(s)), asio::detached);
      } catch (const boost::system::system_error& e) {
        if (e.code() == asio::error::operation_aborted || self->closed_) co_return;
        log::warn(self->opts_.rank, "host-local: accept failed: {}", e.code().message());
        pause = e.code() != asio::error::broken_pipe && e.code() != asio::error::connection_reset;
      }
      if (pause) {  // out of descriptors: not a busy loop
        asio::steady_timer t(self->io_, std::chrono::milliseconds(10));
        co_await t.async_wait(asio::use_awaitable);
      }
    }
  }

  // A place in the group, held from the accept (handshaking) or the welcome
  // (welcomed) until the rank registers or is lost.
  struct Place {
    Group& g;
    int* count;
    Place(Group& group, int& n) : g(group), count(&n) {}
    void move(int& to) {
      --*count;
      count = &to;
      ++*count;
    }
    void release() {
      if (count) --*count, count = nullptr;
    }
    ~Place() {
      if (!count) return;
      release();
      if (!g.closed_ && !g.abandoned_) g.checkFlush();  // lost before it registered
    }
  };

  // The leader's side of one member: handshake, registration, then wait for
  // its close (after the table) or its loss.
  static asio::awaitable<void> serve(std::shared_ptr<Group> self, std::shared_ptr<link::Stream> s) {
    const auto& o = self->opts_;
    int who = -1;
    std::string reason;
    Place place(*self, self->handshaking_);  // taken by acceptLoop
    asio::steady_timer helloBy(self->io_, o.helloWait);
    helloBy.async_wait([w = std::weak_ptr<link::Stream>(s)](const boost::system::error_code& ec) {
      if (auto stream = w.lock(); stream && !ec) stream->close();  // silent: its place goes to another
    });
    try {
      wire::Challenge c{static_cast<std::uint32_t>(o.rank), {}};
      crypto::randomBytes(c.nonce.data(), c.nonce.size());
      const Bytes challenge = wire::encode(c);
      co_await writeMsg(*s, Msg::Challenge, challenge);
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
        refusal = fmt::format("two processes claim rank {} on this host", h.rank),
        code = wire::RejectCode::DuplicateRank;
      if (!refusal.empty()) {
        log::warn(o.rank, "host-local: refused a process on {}: {}", self->name_, refusal);
        const Bytes reject = wire::encode(wire::Reject{code, refusal});
        co_await writeMsg(*s, Msg::Reject, reject);
        s->close();
        if (code == wire::RejectCode::DuplicateRank)
          self->failed(ErrorCode::InvalidArgument, "rendezvous failed: " + refusal, static_cast<int>(h.rank));
        co_return;
      }
      place.move(self->welcomed_);
      const Bytes welcome = wire::encode(wire::Welcome{wire::welcomeProof(o.secret, c, h)});
      co_await writeMsg(*s, Msg::Welcome, welcome);
      auto m2 = co_await readMsg(*s);
      auto& [t2, b2] = m2;
      if (t2 != Msg::Register) throw std::invalid_argument("expected a registration");
      auto r = wire::decodeRegister(b2);
      if (r.rank != h.rank) throw std::invalid_argument("registration for another rank");
      if (self->closed_) co_return;
      if (self->abandoned_) {  // welcomed while the leader failed: it learns why, too
        co_await writeOne(self, s, Msg::Fail, self->fail_);
        co_return;
      }
      place.release();
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

  // A member: tries the next group (this one is full), or this one again
  // after a pause (its leader was between bind and listen, or closed the
  // connection before it answered: then the name is free or soon answers).
  void nextGroup() {
    stream_->close();
    ++probe_;
    if (probe_ > opts_.nranks)  // more groups than ranks: something else holds the names
      return failed(ErrorCode::System, fmt::format("rendezvous: every host-local group up to {} answered full", name_),
                    -1);
    begin();
  }
  static asio::awaitable<void> again(std::shared_ptr<Group> self) {
    self->stream_->close();
    asio::steady_timer t(self->io_, std::chrono::milliseconds(10));
    co_await t.async_wait(asio::use_awaitable);
    if (!self->closed_) self->begin();
  }
  // Before the leader answered: worth another try (bounded).
  bool retryable(const boost::system::error_code& ec) {
    const bool transient = ec == asio::error::connection_refused || ec == asio::error::eof ||
                           ec == asio::error::connection_reset || ec == asio::error::broken_pipe;
    return transient && ++attempts_ < 100;
  }

  // A member's side: handshake, registration, the table.
  static asio::awaitable<void> join(std::shared_ptr<Group> self) {
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
      if (t == Msg::Full) co_return self->nextGroup();
      if (t != Msg::Challenge) throw std::invalid_argument("expected a challenge");
      auto c = wire::decodeChallenge(b);
      wire::Hello h{static_cast<std::uint32_t>(o.rank), static_cast<std::uint32_t>(o.nranks), o.worldId, 0, {}, {}};
      crypto::randomBytes(h.nonce.data(), h.nonce.size());
      h.proof = wire::helloProof(o.secret, c, h);
      const Bytes hello = wire::encode(h);
      std::pair<Msg, Bytes> m2;
      try {
        co_await writeMsg(*s, Msg::Hello, hello);
        m2 = co_await readMsg(*s);
      } catch (const boost::system::system_error& e) {
        if (!self->retryable(e.code())) throw;
        retry = true;  // closed before the welcome: it gave our place away (too slow an answer)
      }
      if (retry) co_return co_await again(self);
      auto& [t2, b2] = m2;
      if (self->closed_) co_return;
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
      co_await writeMsg(*s, Msg::Register, reg);
      if (o.rank == 0) {  // counted by the leader; the root needs no table
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
      if (t3 == Msg::Fail) {  // the leader's cause: its code and the peer it names
        auto cause = decodeCause(b3);
        co_return self->failed(cause.code,
                               fmt::format("rendezvous failed at the host leader of group {} (rank {}): {}",
                                           self->group_, c.rank, cause.text),
                               cause.peer);
      }
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

  asio::io_context& io_;
  const HostGroupOptions opts_;
  const HostGroupEvents events_;
  const PeerAddress self_;
  asio::steady_timer quiet_;
  std::shared_ptr<link::UnixListener> listener_;
  std::shared_ptr<link::Stream> stream_;                  // a member's, to the leader
  std::map<int, std::shared_ptr<link::Stream>> members_;  // the leader's
  std::vector<int> ranks_;                                // the leader's: itself, then members as they came
  std::vector<wire::Register> pending_;
  wire::SharedBytes fail_;  // the leader's Fail message, once it abandoned
  bool leader_ = false, rootHere_ = false, tableSent_ = false, abandoned_ = false, closed_ = false;
  bool awaitingTable_ = false;  // a member's: registered, neither the table nor a Fail read yet
  int leaderRank_ = -1;
  int attempts_ = 0;                    // retries of a group that did not answer yet
  int probe_ = 0;                       // groups found full so far
  int group_ = 0, cap_ = 0;             // the group this rank leads or tries, and its size at most
  int handshaking_ = 0, welcomed_ = 0;  // the leader's places: accepted, not welcomed; welcomed, not registered
  bool sentOn_ = false;                 // the leader's: it answered Full
  std::string name_;                    // its socket
};

}  // namespace

std::shared_ptr<HostGroup> HostGroup::start(asio::io_context& io, HostGroupOptions options, HostGroupEvents events,
                                            const PeerAddress& self) {
  auto g = std::make_shared<Group>(io, std::move(options), std::move(events), self);
  // Begins from the loop: its first events come after start() has returned.
  asio::post(io, [w = std::weak_ptr<Group>(g)] {
    if (auto self = w.lock()) self->begin();
  });
  return g;
}

}  // namespace tether::rdv
