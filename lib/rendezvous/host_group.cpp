#include "rendezvous/host_group.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fstream>
#include <map>

#include "base/bytes.hpp"
#include "base/crypto.hpp"
#include "base/join.hpp"
#include "base/log.hpp"
#include "link/unix_stream.hpp"

namespace tether::rdv {
namespace {

// One message on the host-local stream: u32 length (of what follows, little
// endian), u8 type, payload. Payloads are the handshake's and the
// rendezvous' encodings (wire/handshake.hpp); Fail is u8 ErrorCode, i32 peer
// (little endian; -1: none) + text.
enum class Msg : std::uint8_t { Challenge = 1, Hello, Welcome, Reject, Register, Table, Fail };
using Bytes = std::vector<unsigned char>;
constexpr std::uint32_t kMaxMessage = 1u << 30;

asio::awaitable<void> writeMsg(link::Stream& s, Msg type, const Bytes& payload) {
  auto len = static_cast<std::uint32_t>(payload.size() + 1);
  unsigned char head[5] = {static_cast<unsigned char>(len), static_cast<unsigned char>(len >> 8),
                           static_cast<unsigned char>(len >> 16), static_cast<unsigned char>(len >> 24),
                           static_cast<unsigned char>(type)};
  std::vector<asio::const_buffer> bufs{asio::const_buffer(head, sizeof head),
                                       asio::const_buffer(payload.data(), payload.size())};
  co_await s.write(std::move(bufs));
}

asio::awaitable<std::pair<Msg, Bytes>> readMsg(link::Stream& s) {
  unsigned char head[5];
  const asio::mutable_buffer headBuf(head, sizeof head);
  co_await s.read(headBuf);
  std::uint32_t len = head[0] | head[1] << 8 | head[2] << 16 | static_cast<std::uint32_t>(head[3]) << 24;
  if (len == 0 || len > kMaxMessage) throw std::invalid_argument("malformed host-local message");
  Bytes b(len - 1);
  const asio::mutable_buffer body(b.data(), b.size());
  if (!b.empty()) co_await s.read(body);
  co_return std::pair{static_cast<Msg>(head[4]), std::move(b)};
}

std::string reasonOf(const boost::system::system_error& e) {
  return e.code() == asio::error::eof ? std::string("it closed the connection") : e.code().message();
}

std::string firstLine(const char* path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

class Group final : public HostGroup, public std::enable_shared_from_this<Group> {
 public:
  Group(asio::io_context& io, HostGroupOptions o, HostGroupEvents e, const PeerAddress& self)
      : io_(io), opts_(std::move(o)), events_(std::move(e)), self_(self), quiet_(io) {}

  void begin() {
    if (closed_) return;
    boost::system::error_code ec;
    listener_ = link::UnixListener::open(io_, opts_.socket, ec);
    if (listener_) {
      leader_ = true;
      ranks_.push_back(opts_.rank);
      if (opts_.rank != 0) pending_.push_back({static_cast<std::uint32_t>(opts_.rank), self_});
      log::trace(opts_.rank, "host-local: this rank leads its host ({})", opts_.socket);
      asio::co_spawn(io_, acceptLoop(shared_from_this()), asio::detached);
      if (events_.leading) events_.leading();
      checkFlush();
      return;
    }
    if (ec != asio::error::address_in_use)
      return failed(ErrorCode::System,
                    fmt::format("rendezvous: cannot bind the host-local socket {}: {}", opts_.socket, ec.message()),
                    -1);
    asio::co_spawn(io_, join(shared_from_this()), asio::detached);
  }

  bool leader() const override { return leader_; }
  int leaderRank() const override { return leaderRank_; }
  std::vector<int> ranks() const override { return ranks_; }

  void sendTable(wire::SharedBytes table) override {
    tableSent_ = true;
    if (listener_) listener_->close();  // every rank is here: the name is free again
    for (auto& [r, s] : members_)
      asio::co_spawn(io_, writeOne(shared_from_this(), s, Msg::Table, table), asio::detached);
  }

  void abandon(ErrorCode code, const std::string& reason, int peer) override {
    if (closed_ || !leader_) return;
    abandoned_ = true;
    quiet_.cancel();
    if (listener_) listener_->close();
    Bytes b(5);
    b[0] = static_cast<unsigned char>(code);
    le::store(b.data() + 1, static_cast<std::int32_t>(peer));
    b.insert(b.end(), reason.begin(), reason.end());
    fail_ = std::make_shared<const Bytes>(std::move(b));
    for (auto& [r, s] : members_)
      asio::co_spawn(io_, writeOne(shared_from_this(), s, Msg::Fail, fail_), asio::detached);
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
    if (leader_)
      return fmt::format("this rank leads its host ({}): ranks {}{} are here, of {}", opts_.socket,
                         joined(ranks_, ", "), rootHere_ ? " and 0" : "",
                         opts_.localRanks > 0 ? fmt::format("{} expected (TETHER_LOCAL_NRANKS)", opts_.localRanks)
                                              : std::string("an unknown number"));
    if (leaderRank_ >= 0)
      return fmt::format("registered with the host leader (rank {}, {}), which has not sent the table", leaderRank_,
                         opts_.socket);
    return fmt::format("could not join the host leader at {}", opts_.socket);
  }

 private:
  void failed(ErrorCode code, std::string what, int peer) {
    if (closed_ || abandoned_) return;
    if (events_.failed) events_.failed(code, std::move(what), peer);
  }

  int counted() const { return static_cast<int>(ranks_.size()) + (rootHere_ ? 1 : 0); }

  // A known host size: one batch when every rank is here (and one per late
  // rank, if the count was too small). Unknown: a batch once no rank arrived
  // for `quiet`.
  void checkFlush() {
    if (opts_.localRanks > 0) {
      if (counted() >= opts_.localRanks) flush();
      return;
    }
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

  static asio::awaitable<void> acceptLoop(std::shared_ptr<Group> self) {
    while (!self->closed_ && !self->abandoned_) {
      bool pause = false;
      try {
        auto s = co_await self->listener_->accept();
        asio::co_spawn(self->io_, serve(self, std::move(s)), asio::detached);
      } catch (const boost::system::system_error& e) {
        if (e.code() == asio::error::operation_aborted || self->closed_) co_return;
        log::warn(self->opts_.rank, "host-local: accept failed: {}", e.code().message());
        pause = true;  // out of descriptors: not a busy loop
      }
      if (pause) {
        asio::steady_timer t(self->io_, std::chrono::milliseconds(10));
        co_await t.async_wait(asio::use_awaitable);
      }
    }
  }

  // The leader's side of one member: handshake, registration, then wait for
  // its close (after the table) or its loss.
  static asio::awaitable<void> serve(std::shared_ptr<Group> self, std::shared_ptr<link::Stream> s) {
    const auto& o = self->opts_;
    int who = -1;
    std::string reason;
    try {
      wire::Challenge c{static_cast<std::uint32_t>(o.rank), {}};
      crypto::randomBytes(c.nonce.data(), c.nonce.size());
      const Bytes challenge = wire::encode(c);
      co_await writeMsg(*s, Msg::Challenge, challenge);
      auto m = co_await readMsg(*s);
      auto& [t, b] = m;
      if (t != Msg::Hello) throw std::invalid_argument("expected a hello");
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
        log::warn(o.rank, "host-local: refused a process on {}: {}", o.socket, refusal);
        const Bytes reject = wire::encode(wire::Reject{code, refusal});
        co_await writeMsg(*s, Msg::Reject, reject);
        s->close();
        if (code == wire::RejectCode::DuplicateRank)
          self->failed(ErrorCode::InvalidArgument, "rendezvous failed: " + refusal, static_cast<int>(h.rank));
        co_return;
      }
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
      log::trace(o.rank, "host-local: rank {} joined ({} here)", who, self->counted());
      self->checkFlush();
      unsigned char byte;
      const asio::mutable_buffer one(&byte, 1);
      co_await s->read(one);  // a member sends nothing more: EOF once it has the table
      reason = "it sent more than a registration";
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
      log::warn(o.rank, "host-local: a connection on {} ended before it registered: {}", o.socket, reason);
      co_return;
    }
    self->failed(ErrorCode::PeerLost,
                 fmt::format("rendezvous failed: lost rank {} on this host (the host leader is rank {}) before the "
                             "table was out: {}",
                             who, o.rank, reason),
                 who);
  }

  // Binds or joins anew after a moment: the leader was between bind and
  // listen, or gone (then the name is free).
  static asio::awaitable<void> rejoin(std::shared_ptr<Group> self) {
    asio::steady_timer t(self->io_, std::chrono::milliseconds(10));
    co_await t.async_wait(asio::use_awaitable);
    if (!self->closed_) self->begin();
  }

  // A member's side: handshake, registration, the table.
  static asio::awaitable<void> join(std::shared_ptr<Group> self) {
    const auto& o = self->opts_;
    link::UnixDialer dialer(self->io_);
    auto s = dialer.open();
    self->stream_ = s;
    std::string reason;
    bool retry = false;
    try {
      bool again = false;
      try {
        const link::Endpoint at{"unix", o.socket};
        co_await s->connect(at);
      } catch (const boost::system::system_error& e) {
        // The leader is between bind and listen, or gone (then the name is
        // free): try again to bind or join.
        if (e.code() != asio::error::connection_refused || ++self->attempts_ >= 100) throw;
        again = true;
      }
      if (again) {
        co_await rejoin(self);
        co_return;
      }
      auto m = co_await readMsg(*s);
      auto& [t, b] = m;
      if (t != Msg::Challenge) throw std::invalid_argument("expected a challenge");
      auto c = wire::decodeChallenge(b);
      wire::Hello h{static_cast<std::uint32_t>(o.rank), static_cast<std::uint32_t>(o.nranks), o.worldId, 0, {}, {}};
      crypto::randomBytes(h.nonce.data(), h.nonce.size());
      h.proof = wire::helloProof(o.secret, c, h);
      const Bytes hello = wire::encode(h);
      co_await writeMsg(*s, Msg::Hello, hello);
      auto m2 = co_await readMsg(*s);
      auto& [t2, b2] = m2;
      if (t2 == Msg::Reject) {
        auto rj = wire::decodeReject(b2);
        s->close();
        co_return self->failed(
            ErrorCode::InvalidArgument,
            fmt::format("rendezvous: refused by the host leader (rank {}) at {}: {}", c.rank, o.socket, rj.reason),
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
                                           o.socket, c.rank),
                               -1);
      }
      self->leaderRank_ = static_cast<int>(c.rank);
      const Bytes reg = wire::encode(wire::Register{static_cast<std::uint32_t>(o.rank), self->self_});
      co_await writeMsg(*s, Msg::Register, reg);
      if (o.rank == 0) {  // counted by the leader; the root needs no table
        s->close();
        co_return;
      }
      auto m3 = co_await readMsg(*s);
      auto& [t3, b3] = m3;
      s->close();
      if (self->closed_) co_return;
      if (t3 == Msg::Table) {
        self->closed_ = true;  // nothing more to report
        co_return self->events_.table(std::make_shared<const Bytes>(std::move(b3)));
      }
      if (t3 == Msg::Fail && b3.size() >= 5) {  // the leader's cause: its code and the peer it names
        auto code = static_cast<ErrorCode>(b3[0]);
        auto peer = le::load<std::int32_t>(b3.data() + 1);
        co_return self->failed(code,
                               fmt::format("rendezvous failed at the host leader (rank {}): {}", c.rank,
                                           std::string(b3.begin() + 5, b3.end())),
                               peer);
      }
      throw std::invalid_argument("unexpected host-local message");
    } catch (const boost::system::system_error& e) {
      reason = reasonOf(e);
      // Dropped before the leader's welcome: it was leaving (failing, its
      // listener closing, its backlog reset), and the name is free again.
      retry = self->leaderRank_ < 0 && e.code() != asio::error::operation_aborted && ++self->attempts_ < 100;
    } catch (const std::exception& e) {
      reason = e.what();
    }
    if (self->closed_) co_return;
    if (retry) {
      s->close();
      co_await rejoin(self);
      co_return;
    }
    if (self->leaderRank_ < 0)
      self->failed(ErrorCode::PeerLost,
                   fmt::format("rendezvous: cannot join the host leader at {}: {}", o.socket, reason), -1);
    else
      self->failed(ErrorCode::PeerLost,
                   fmt::format("rendezvous: lost the host leader (rank {}) before the table arrived: {}",
                               self->leaderRank_, reason),
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
  int leaderRank_ = -1;
  int attempts_ = 0;
};

}  // namespace

std::string hostSocketName(const wire::Secret& secret, std::uint64_t worldId, int nranks) {
  char ns[128] = {};
  ssize_t n = ::readlink("/proc/self/ns/net", ns, sizeof ns - 1);
  std::string identity = fmt::format("tether-host-local|{}|{}|{}|{}", worldId, nranks,
                                     firstLine("/proc/sys/kernel/random/boot_id"), n > 0 ? std::string(ns, n) : "");
  auto d = crypto::hmacSha256(secret.data(), secret.size(), identity.data(), identity.size());
  std::string name = "@tether-";
  for (int i = 0; i < 8; ++i) name += fmt::format("{:02x}", d[i]);
  return name;
}

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
