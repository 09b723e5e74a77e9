// World lifecycle: listener, rendezvous and event loop; running calls with
// deadlines; abort; orderly close.
#include "core/world.hpp"

#include <fmt/format.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <algorithm>
#include <thread>

#include "base/bytes.hpp"
#include "base/endpoint.hpp"
#include "base/env.hpp"
#include "base/log.hpp"
#include "link/tcp_stream.hpp"
#include "rendezvous/reserved_listener.hpp"

namespace tether {
namespace {

link::ConnectorConfig connectorConfig(const WorldConfig& c) {
  link::ConnectorConfig k;
  k.rank = c.rank;
  k.nranks = c.nranks;
  k.secret = c.secret;
  k.worldId = c.worldId;
  k.handshakeTimeout = c.handshakeTimeout;
  k.maxDials = c.maxDials;
  return k;
}

link::TcpOptions tcpOptions(const WorldConfig& c) { return {c.keepaliveIdleS, c.keepaliveIntervalS, c.keepaliveCount}; }

}  // namespace

World::World(WorldConfig config)
    : cfg_(std::move(config)),
      connector_(io_, connectorConfig(cfg_), *this, std::make_unique<link::TcpDialer>(io_, tcpOptions(cfg_))),
      links_(cfg_.nranks),
      lingering_(cfg_.nranks),
      epoch_(cfg_.nranks, 0),
      dialDeferred_(cfg_.nranks, 0),
      predecessorWaits_(cfg_.nranks),
      peers_(cfg_.nranks),
      abort_(cfg_.rank, cfg_.nranks),
      probe_(io_, cfg_.rank, [this](int peer, wire::Kind kind, const std::vector<unsigned char>& payload) {
        return sendControlTo(peer, kind, payload);
      }) {
  rdv::Config rc{cfg_.rank, cfg_.nranks, toPeerAddress(cfg_.root, 0), cfg_.timeout};
  rc.secret = cfg_.secret;
  rc.worldId = cfg_.worldId;
  rc.io = &io_;
  rendezvous_ = rdv::make(*this, rc, env::get("TETHER_RENDEZVOUS").value_or("auto"));
}

std::shared_ptr<World> World::create(WorldConfig config) {
  const auto began = Clock::now();
  const auto deadline = began + config.timeout;
  std::shared_ptr<World> w;
  int rank = config.rank;
  try {
    w.reset(new World(std::move(config)));
    w->start();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    // Out of descriptors (epoll, eventfd, sockets) or threads: a System error
    // naming the rank, not a bare boost/std exception.
    throw Error(ErrorCode::System, fmt::format("rank {}: cannot start: {}", rank, e.what()), rank);
  }
  if (!w->driver_.waitUntil(w->initDone_, deadline)) {
    asio::post(w->io_, [raw = w.get()] { raw->rendezvous_->onTimeout(); });
    w->driver_.wait(w->initDone_);
  }
  // A failed rendezvous has already told the ranks that depend on it (the
  // root aborts the registered ranks); ~World drains that notice and closes.
  w->initDone_.rethrowIfFailed();
  w->learnTopology();
  log::info(w->rank(), "joined a world of {} ranks in {:.1f} ms", w->nranks(),
            std::chrono::duration<double, std::milli>(Clock::now() - began).count());
  return w;
}

void World::start() {
  // Listener first: peers may dial us as soon as the root publishes the table.
  boost::system::error_code ec;
  tcp::endpoint at = cfg_.root;
  std::shared_ptr<link::TcpListener> listener;
  if (rank() == 0) {
    // An adopted socket was bound by createUniqueId() (not listening yet).
    auto fd = reserved::take(toPeerAddress(cfg_.root, 0));
    listener = link::TcpListener::open(io_, tcpOptions(cfg_), cfg_.root, /*reuseAddress=*/true, fd, ec);
  } else {
    reserved::release(toPeerAddress(cfg_.root, 0));  // an inherited reservation is rank 0's, not ours
    at = tcp::endpoint(chooseListenAddress(cfg_.root.address(), cfg_.listenHost, rank()), 0);
    listener = link::TcpListener::open(io_, tcpOptions(cfg_), at, /*reuseAddress=*/false, std::nullopt, ec);
  }
  if (ec) {
    // Another process listens on the root's port: another job given the same
    // root address, or an earlier run still closing. Never share it.
    std::string hint = rank() == 0 && ec == asio::error::address_in_use
                           ? " (another process listens there: another job with the same TETHER_ROOT or "
                             "MASTER_ADDR/MASTER_PORT, or an earlier run still closing; give each job its own port)"
                           : "";
    throw Error(ErrorCode::System,
                fmt::format("rank {}: cannot listen on {}{}: {}{}", rank(), rank() == 0 ? "the root address " : "",
                            toString(at), ec.message(), hint),
                rank());
  }
  auto local = listener->localEndpoint();
  listener_ = listener;
  tcp::endpoint advertised = local;
  std::string override = cfg_.advertiseFor ? cfg_.advertiseFor(toString(local)) : cfg_.advertise;
  if (!override.empty()) {
    auto hp = parseHostPort(override);
    advertised = tcp::endpoint(resolveHost(hp.host), hp.port);
  }
  self_ = toPeerAddress(advertised, thisHostId());
  self_.cores = static_cast<std::uint16_t>(std::clamp(std::thread::hardware_concurrency(), 1u, 65535u));
  log::info(rank(), "listening on {} (advertised as {})", toString(local), toString(advertised));

  work_.emplace(io_.get_executor());
  driver_.start();
  asio::post(io_, [this] {
    connector_.listen(listener_);
    rendezvous_->start(self_);
  });
}

void World::learnTopology() {
  std::unordered_map<std::uint64_t, int> nodes;
  std::vector<int> cores;
  topology_.nodeOf.resize(nranks());
  for (int r = 0; r < nranks(); ++r) {
    const PeerAddress a = address(r);
    auto [it, added] = nodes.emplace(a.hostId, static_cast<int>(nodes.size()));
    if (added) {
      topology_.ranksOn.push_back(0);
      cores.push_back(a.cores);
    }
    topology_.nodeOf[r] = it->second;
    ++topology_.ranksOn[it->second];
  }
  for (std::size_t n = 0; n < cores.size(); ++n)
    if (cores[n] > 0 && topology_.ranksOn[n] > cores[n]) topology_.cpuBound = true;
}

void World::finishInit(std::exception_ptr e) {
  if (initComplete_) return;
  initComplete_ = true;
  initOk_ = !e;
  initDone_.complete(e);
}

World::~World() { close(std::min(cfg_.timeout, std::chrono::milliseconds(5000)), cfg_.timeout); }

bool World::close(std::chrono::milliseconds drain, std::chrono::milliseconds limit) {
  if (!work_ || closed_.exchange(true)) return drained_;
  auto done = std::make_shared<Completion>();
  asio::post(io_, [this, done, drain, limit] { shutdownOnProgress(done, drain, limit); });
  driver_.wait(*done);
  driver_.stop();
  work_.reset();
  return drained_;
}

void World::shutdownOnProgress(const std::shared_ptr<Completion>& done, std::chrono::milliseconds drain,
                               std::chrono::milliseconds limit) {
  shuttingDown_ = true;
  log::info(rank(), "closing: {} links opened over the run, at most {} open at once (budget {})", linksOpened_,
            peakLinks_, cfg_.maxLinks);
  // The listener stays open until the drain ends (R7): a peer may still be
  // dialling us to deliver frames, or answer our own last dial.
  std::vector<std::shared_ptr<link::Link>> current;
  for (auto& l : links_)
    if (l) current.push_back(l);
  for (auto& l : current) {
    // Links still dialling carry queued frames too (a last small send is
    // fire-and-forget, an abort notice): they get the goodbye behind them and
    // are waited for. After a failed rendezvous nothing queued is worth
    // waiting for. Not after an abort either: the peer may have admitted the
    // dial already, and a connection closed without a goodbye would make it
    // report this (healthy) rank as lost.
    if (l->state() == link::Link::State::Dialing && (!initOk_ || unavailable(l->peer()))) {
      l->fail("shutting down after a failed rendezvous");
      continue;
    }
    l->sendGoodbye(wire::GoodbyeMode::Final);
    if (l->state() == link::Link::State::Closing) setAside(*l);
  }
  // Let queued frames reach the peers and be read (bounded), then close.
  drainTimer_.emplace(io_);
  drainLimit_ = Clock::now() + std::max(drain, limit);
  drainOpen_ = -1;
  armDrain(done, drain);
  checkDrained();
}

// The drain ends when every link has closed, or when `drain` passes with no
// link closing meanwhile: peers that keep confirming (a loaded host with many
// links) extend it, up to `limit` (close()'s caller's); a silent one does not.
void World::armDrain(const std::shared_ptr<Completion>& done, std::chrono::milliseconds drain) {
  drainProgress_ = false;
  drainTimer_->expires_after(drain);
  drainTimer_->async_wait([this, done, drain](boost::system::error_code) {
    if (!drained_ && drainProgress_ && Clock::now() + drain <= drainLimit_) return armDrain(done, drain);
    if (listener_) listener_->close();
    std::vector<std::shared_ptr<link::Link>> all;
    forEachLink([&](link::Link& l) { all.push_back(l.shared_from_this()); });
    for (auto& l : all) l->fail("shutting down");
    done->complete(nullptr);
  });
}

std::shared_ptr<Completion> World::start(const std::shared_ptr<Op>& op, Body body) {
  if (closed_.load())
    throw Error(ErrorCode::InvalidArgument, fmt::format("rank {}: {}: the bootstrap was closed", rank(), op->name()),
                rank());
  if (abort_.aborted()) throw abortedError(op->name());
  auto done = std::make_shared<Completion>();
  asio::post(io_, [this, op, body = std::move(body), done]() mutable {
    if (abort_.handled()) return done->complete(std::make_exception_ptr(abortedError(op->name())));
    activeOps_.insert(op.get());
    op->active = true;
    asio::co_spawn(io_, body(*op), [this, op, done](std::exception_ptr e) {
      endOp(*op, e);
      if (op->draining > 0)  // a link still uses its buffer (Link::abandon)
        op->afterDrain = [done, e] { done->complete(e); };
      else
        done->complete(e);
    });
  });
  return done;
}

void World::wait(const std::shared_ptr<Op>& op, Completion& done, Clock::time_point deadline) {
  const auto began = Clock::now();
  if (!driver_.waitUntil(done, deadline)) {
    // The probe for who is behind: a tenth of the call's time, 0.5 s to 1 s.
    const auto budget = std::clamp(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - began) / 10,
                                   std::chrono::milliseconds(500), std::chrono::milliseconds(1000));
    asio::post(io_, [this, op, budget] { timeOut(op, budget); });
    driver_.wait(done);
  }
  done.rethrowIfFailed();
}

bool World::cancel(const std::shared_ptr<Op>& op) {
  auto answer = std::make_shared<Completion>();
  auto cancelled = std::make_shared<bool>(false);
  asio::post(io_, [this, op, answer, cancelled] {
    const bool withdrawable =
        op->kind() == Op::Kind::Collective || (op->kind() == Op::Kind::Recv && !op->posted.empty());
    if (op->active && !op->error && withdrawable) {
      *cancelled = true;
      const std::string what = fmt::format("rank {}: {}: cancelled on this rank", rank(), op->name());
      failOp(*op, std::make_exception_ptr(Error(ErrorCode::Aborted, what, rank())));
      // Peers already run this collective and will never get our steps: on
      // the world communicator they are told at once (as after any failed
      // collective); a child communicator's peers fail at their deadline.
      if (op->kind() == Op::Kind::Collective && op->comm == cfg_.worldId)
        abortOnProgress({static_cast<std::uint32_t>(rank()), what, wire::kNoRank}, true);
    }
    answer->complete(nullptr);
  });
  driver_.wait(*answer);
  return *cancelled;
}

void World::abort(int origin, const std::string& reason) {
  const wire::AbortNotice n{static_cast<std::uint32_t>(origin), reason, wire::kNoRank};
  abort_.record(n);
  asio::post(io_, [this, n] { abortOnProgress(n, true); });
}

void World::abortOnProgress(const wire::AbortNotice& n, bool notifyPeers, int from) {
  if (!abort_.beginHandling(n)) return;
  const int origin = static_cast<int>(n.origin);
  if (origin != rank()) log::warn(rank(), "rank {} aborted: {}", origin, n.reason);
  if (notifyPeers) sendAbortNotice(from);
  std::vector<Op*> ops(activeOps_.begin(), activeOps_.end());
  for (Op* op : ops) failOp(*op, std::make_exception_ptr(abortedError(op->name())));
  if (!initComplete_) finishInit(std::make_exception_ptr(abortedError("rendezvous")));
}

// Over every open link (fast, as far as they reach), then down the abort tree
// (AbortChannel) so that it reaches every rank whatever the link budget has
// closed. Needs the rendezvous table to dial; before it, open links only.
void World::sendAbortNotice(int from) {
  const auto n = abort_.notice();
  const auto payload = wire::encode(n);
  const int origin = static_cast<int>(n.origin);
  for (int r : {origin, from})
    if (r >= 0 && r < nranks()) abort_.markSent(r);  // it has the notice and forwards it itself
  // A copy: a write that fails at once closes its link and changes links_.
  const auto current = links_;
  for (const auto& l : current)
    if (l && !l->goodbyeSent() && l->peer() != origin && l->peer() != from) {
      abort_.markSent(l->peer());
      sendControl(*l, wire::Kind::Abort, payload);
    }
  if (!initComplete_ || !initOk_) return;
  for (int t : abort_.treeTargets(origin == rank(), [this](int r) { return unavailable(r); }))
    sendAbortNoticeTo(t, payload);
}

void World::sendAbortNoticeTo(int peer, const std::vector<unsigned char>& payload) {
  auto l = linkFor(peer);
  if (!l || l->goodbyeSent()) return;
  log::trace(rank(), "abort notice to rank {} down the abort tree", peer);
  sendControl(*l, wire::Kind::Abort, payload);
  if (shuttingDown_) {  // a link opened while closing: it closes behind the notice
    l->sendGoodbye(wire::GoodbyeMode::Final);
    if (l->state() == link::Link::State::Closing) setAside(*l);
  }
}

bool World::unavailable(int peer) const {
  const auto& st = peers_[static_cast<std::size_t>(peer)];
  return st.gone || st.leaving || static_cast<std::uint32_t>(peer) == abort_.notice().lost;
}

// A world collective that failed here leaves every other rank waiting for
// steps this rank will never send: send them an abort notice (origin: this
// rank, reason: the error) so they fail now with Aborted instead of at their
// deadline. Only the world communicator: a child communicator's failure must
// not stop ranks outside it, and point-to-point failures concern two ranks.
void World::abortAfterFailedCollective(std::exception_ptr e) {
  if (abort_.handled()) return;
  try {
    std::rethrow_exception(e);
  } catch (const Error& err) {
    const bool lost = err.code() == ErrorCode::PeerLost && err.peer() >= 0 && err.peer() < nranks();
    if (lost || err.code() == ErrorCode::Protocol || err.code() == ErrorCode::Timeout)
      abortOnProgress({static_cast<std::uint32_t>(rank()), err.what(),
                       lost ? static_cast<std::uint32_t>(err.peer()) : wire::kNoRank},
                      true);
  } catch (...) {
  }
}

Error World::peerGoneError(int peer, const std::string& opName) const {
  const auto& st = peers_[peer];
  std::string why = st.graceful ? "it closed its bootstrap" : st.reason;
  return Error(ErrorCode::PeerLost, fmt::format("rank {}: {}: lost rank {}: {}", rank(), opName, peer, why), rank(),
               peer);
}

void World::addCommunicator(std::uint64_t comm, std::shared_ptr<CollectiveSeq> seq) {
  asio::post(io_, [this, comm, seq = std::move(seq)]() mutable { comms_[comm] = std::move(seq); });
}

void World::removeCommunicator(std::uint64_t comm) {
  if (closed_.load()) return;
  asio::post(io_, [this, comm] { comms_.erase(comm); });
}

}  // namespace tether
