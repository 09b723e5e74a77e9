// World lifecycle: listener, rendezvous and event loop; running calls with
// deadlines; abort; orderly close.
#include "core/world.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <algorithm>

#include "base/bytes.hpp"
#include "base/endpoint.hpp"
#include "base/env.hpp"
#include "base/log.hpp"
#include "link/socket_stream.hpp"
#include "link/tcp_stream.hpp"

#include "tether/detail/core/failures.hpp"

namespace tether {

namespace failures = detail::core::failures;

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
      admission_(cfg_.rank, table_, life_, abort_, [this] { enforceBudget(); }),
      connector_(io_, connectorConfig(cfg_), admission_, std::make_unique<link::TcpDialer>(io_, tcpOptions(cfg_))),
      host_(io_, cfg_.rank, cfg_.timeout, table_, connector_,
            {[this](std::exception_ptr e) { finishInit(std::move(e)); },
             [this](const std::string& reason) {
               abortOnProgress({static_cast<std::uint32_t>(rank()), reason, wire::kNoRank}, true);
             },
             [this](rdv::Phase p) { init_.mark(p); }, [this](int peer) { countDial(peer); }}),
      table_(io_, static_cast<link::LinkSink&>(*this), cfg_.rank, cfg_.nranks, cfg_.maxPayload),
      abort_(cfg_.rank, cfg_.nranks),
      probe_(io_, cfg_.rank, [this](int peer, wire::Kind kind, const std::vector<unsigned char>& payload) {
        return sendControlTo(peer, kind, payload);
      }),
      awaitWatch_(io_, [this](int peer) { dialIfStillAwaited(peer); }) {
  rdv::Config rc{cfg_.rank, cfg_.nranks, toPeerAddress(cfg_.root, 0), cfg_.timeout};
  rc.secret = cfg_.secret;
  rc.worldId = cfg_.worldId;
  rc.io = &io_;
  rc.treeRadix = cfg_.rendezvousTreeRadix;
  rc.hostLocal = cfg_.hostLocal;
  rc.localRanks = cfg_.localRanks;
  rc.hostGroupMax = cfg_.hostGroupMax;
  rendezvous_ = rdv::make(host_, rc, cfg_.rendezvous);
  admission_.setRendezvous(*rendezvous_);
  admission_.setInitClock(init_);
  admission_.setObserverDesk([this](std::shared_ptr<link::Stream> s) { desk_.serve(std::move(s)); });
}

std::shared_ptr<World> World::create(WorldConfig config) {
  const auto began = config.began == Clock::time_point{} ? Clock::now() : config.began;
  config.began = began;
  const auto deadline = began + config.timeout;
  std::shared_ptr<World> w;
  int rank = config.rank;
  try {
    w.reset(new World(std::move(config)), &World::release);
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
  w->init_.mark(InitClock::Total);
  log::info(w->rank(), "joined a world of {} ranks in {:.1f} ms ({})", w->nranks(),
            std::chrono::duration<double, std::milli>(Clock::now() - began).count(), w->init_.text());
  return w;
}

void World::start() {
  // Listener first: peers may dial us as soon as the root publishes the table.
  self_ = openListener(io_, tcpOptions(cfg_), cfg_, listener_);
  init_.mark(InitClock::Listen);
  work_.emplace(io_.get_executor());
  driver_.start();
  asio::post(io_, [this] {
    connector_.listen(listener_);
    rendezvous_->start(self_);
  });
}

void World::learnTopology() {
  topology_ = tether::learnTopology(nranks(), [this](int r) { return address(r); });
  driver_.setRanksOnHost(topology_.ranksOn[topology_.nodeOf[rank()]]);  // polls only where cores are free
}

void World::finishInit(std::exception_ptr e) {
  if (!life_.finishJoin(!e)) return;
  if (!e) init_.mark(InitClock::Table);
  initDone_.complete(e);
}

World::~World() { close(std::min(cfg_.timeout, std::chrono::milliseconds(5000)), cfg_.timeout); }

void World::release(World* w) {
  if (w->forked()) return w->abandon();  // leaked: its threads are the parent's, its locks may be held by them
  const void* owner = link::descriptorOwner(w->io_.get_executor());
  delete w;
  fds::forget(owner);
}

// No goodbye (the parent's links go on), no shutdown(2) (it would end the
// parent's connections too), no lock, no thread, no event loop: only close(2)
// of this world's sockets, so the child does not keep the parent's listening
// port and connections open after the parent is gone. The event loop's own
// epoll, eventfd and timerfd stay open until exit or exec (close-on-exec).
// The world itself is kept in a list that lives as long as the process, so
// a leak checker (LSan in the child's exit) sees it as reachable, not lost.
void World::abandon() {
  fds::closeInherited(link::descriptorOwner(io_.get_executor()));
  static auto* abandoned = new std::vector<const World*>;
  abandoned->push_back(this);
}

void World::checkProcess(const std::string& opName) const {
  if (!forked()) return;
  throw Error(ErrorCode::InvalidArgument,
              fmt::format("rank {}: {}: the bootstrap is used in a forked child (pid {}) of the process that "
                          "created it (pid {}); a child cannot use its parent's bootstrap (it shares the parent's "
                          "connections): create a new one in the child (docs/faults.md, \"After fork\")",
                          rank(), opName, ::getpid(), creator_),
              rank());
}

bool World::close(std::chrono::milliseconds drain, std::chrono::milliseconds limit) {
  if (forked()) {
    abandon();
    return false;
  }
  if (!work_ || closed_.exchange(true)) return life_.drained();
  auto done = std::make_shared<Completion>();
  asio::post(io_, [this, done, drain, limit] { shutdownOnProgress(done, drain, limit); });
  driver_.wait(*done);
  driver_.stop();
  work_.reset();
  return life_.drained();
}

void World::shutdownOnProgress(const std::shared_ptr<Completion>& done, std::chrono::milliseconds drain,
                               std::chrono::milliseconds limit) {
  life_.beginDrain(Clock::now() + std::max(drain, limit));
  log::info(rank(), "closing: {} links opened over the run, at most {} open at once (budget {})",
            admission_.linksOpened(), admission_.peakLinks(), cfg_.maxLinks);
  failHeldSends();  // nothing may be queued behind the goodbyes
  // The listener stays open until the drain ends (R7): a peer may still be
  // dialling us to deliver frames, or answer our own last dial.
  std::vector<std::shared_ptr<link::Link>> current;
  for (int p = 0; p < nranks(); ++p)
    if (const auto& l = table_.current(p)) current.push_back(l);
  for (auto& l : current) {
    // Links still dialling carry queued frames too (a last small send is
    // fire-and-forget, an abort notice): they get the goodbye behind them and
    // are waited for. After a failed rendezvous nothing queued is worth
    // waiting for. Not after an abort either: the peer may have admitted the
    // dial already, and a connection closed without a goodbye would make it
    // report this (healthy) rank as lost.
    if (l->state() == link::Link::State::Dialing && (!life_.joined() || relay_.unavailable(l->peer()))) {
      l->fail("shutting down after a failed rendezvous");
      continue;
    }
    l->sendGoodbye(wire::GoodbyeMode::Final);
    if (l->state() == link::Link::State::Closing) table_.setAside(*l);
  }
  // Let queued frames reach the peers and be read (bounded), then close.
  drainTimer_.emplace(io_);
  armDrain(done, drain);
  checkDrained();
}

// The drain ends when every link has closed, or when `drain` passes with no
// link closing meanwhile: peers that keep confirming (a loaded host with many
// links) extend it, up to `limit` (close()'s caller's); a silent one does not.
void World::armDrain(const std::shared_ptr<Completion>& done, std::chrono::milliseconds drain) {
  drainTimer_->expires_after(drain);
  drainTimer_->async_wait([this, done, drain](boost::system::error_code) {
    if (life_.extend(Clock::now(), drain)) return armDrain(done, drain);
    if (listener_) listener_->close();
    desk_.closeAll();
    std::vector<std::shared_ptr<link::Link>> all;
    table_.forEach([&](link::Link& l) { all.push_back(l.shared_from_this()); });
    for (auto& l : all) l->fail("shutting down");
    done->complete(nullptr);
  });
}

void World::checkStart(const Op& op) const {
  checkProcess(op.name());
  if (closed_.load())
    throw Error(ErrorCode::InvalidArgument, fmt::format("rank {}: {}: the bootstrap was closed", rank(), op.name()),
                rank());
  if (abort_.aborted()) {
    if (op.counters) op.counters->aborts.fetch_add(1, std::memory_order_relaxed);
    throw abortedError(op.name());
  }
}

std::shared_ptr<Completion> World::start(const std::shared_ptr<Op>& op, Body body) {
  checkStart(*op);
  auto done = std::make_shared<Completion>();
  op->began = Clock::now();
  asio::post(io_, [this, op, body = std::move(body), done]() mutable {
    if (abort_.handled()) {
      if (op->counters) op->counters->aborts.fetch_add(1, std::memory_order_relaxed);
      return done->complete(std::make_exception_ptr(abortedError(op->name())));
    }
    ops_.add(*op);
    asio::co_spawn(io_, runOp(op, std::move(body), done), asio::detached);
  });
  return done;
}

void World::startRun(Op& op, Resumable& run, PostSlot& slot) {
  checkStart(op);
  op.began = Clock::now();
  auto begin = [this, &op, &run] {
    if (abort_.handled()) {
      if (op.counters) op.counters->aborts.fetch_add(1, std::memory_order_relaxed);
      return run.resume(std::make_exception_ptr(abortedError(op.name())));
    }
    ops_.add(op);
    run.resume(nullptr);
  };
  if (!driver_.runIfFree(begin)) asio::post(io_, asio::bind_allocator(slot.allocator(), begin));
}

// The op ends inside its own coroutine, not in co_spawn's completion handler:
// the driver resumes operations between handlers, outside the io_context's
// run(), where that handler would be posted (one more trip through the
// event loop, an extra epoll_wait per call) instead of run at once.
asio::awaitable<void> World::runOp(std::shared_ptr<Op> op, Body body, std::shared_ptr<Completion> done) {
  std::exception_ptr e;
  try {
    co_await body(*op);
  } catch (...) {
    e = std::current_exception();
  }
  finishOp(*op, e, done);
}

void World::finishOp(Op& op, std::exception_ptr e, const std::shared_ptr<Completion>& done) {
  endOp(op, e);
  if (op.draining > 0)  // a link still uses its buffer (Link::abandon)
    op.afterDrain = [done, e] { done->complete(e); };
  else
    done->complete(e);
}

namespace {
// The probe for who is behind: a tenth of the call's time, 0.5 s to 1 s.
std::chrono::milliseconds probeBudget(World::Clock::duration callTime) {
  return std::clamp(std::chrono::duration_cast<std::chrono::milliseconds>(callTime) / 10,
                    std::chrono::milliseconds(500), std::chrono::milliseconds(1000));
}
}  // namespace

void World::wait(const std::shared_ptr<Op>& op, Completion& done, Clock::time_point deadline) {
  checkProcess(op->name());
  if (!driver_.waitUntil(done, deadline)) {
    const auto budget = probeBudget(deadline - op->began);
    asio::post(io_, [this, op, budget] { probe_.timeOut(op, ops_, life_.joined() && !life_.closing(), budget); });
    driver_.wait(done);
  }
  done.rethrowIfFailed();
}

void World::expireAt(const std::shared_ptr<Op>& op, Clock::time_point deadline) {
  const auto budget = probeBudget(deadline - Clock::now());
  asio::post(io_, [this, op, deadline, budget] {
    if (!op->active || op->error) return;  // ended already
    op->deadline = std::make_unique<asio::steady_timer>(io_, deadline);
    op->deadline->async_wait([this, op, budget](boost::system::error_code ec) {
      if (!ec) probe_.timeOut(op, ops_, life_.joined() && !life_.closing(), budget);
    });
  });
}

bool World::cancel(const std::shared_ptr<Op>& op) {
  checkProcess(op->name());
  auto answer = std::make_shared<Completion>();
  auto cancelled = std::make_shared<bool>(false);
  asio::post(io_, [this, op, answer, cancelled] {
    const bool withdrawable =
        op->kind() == Op::Kind::Collective || (op->kind() == Op::Kind::Recv && !op->posted.empty());
    if (op->active && !op->error && withdrawable) {
      *cancelled = true;
      const std::string what =
          failures::failure(failures::rankName(rank()), op->name(), failures::cancelledOnThisRank());
      ops_.failOp(*op, std::make_exception_ptr(Error(ErrorCode::Aborted, what, rank())));
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
  checkProcess("abort");
  const wire::AbortNotice n{static_cast<std::uint32_t>(origin), reason, wire::kNoRank};
  abort_.record(n);
  asio::post(io_, [this, n] { abortOnProgress(n, true); });
}

void World::abortOnProgress(const wire::AbortNotice& n, bool notifyPeers, int from) {
  if (!relay_.handle(n, notifyPeers, from, life_.joined())) return;
  for (Op* op : ops_.active()) ops_.failOp(*op, std::make_exception_ptr(abortedError(op->name())));
  if (life_.joining()) {
    auto error = abortedError("rendezvous");
    rendezvous_->onAborted(error.what());
    finishInit(std::make_exception_ptr(error));
  }
}

// Only the world communicator: a child communicator's failure must not stop
// ranks outside it, and point-to-point failures concern two ranks.
void World::abortAfterFailedCollective(std::exception_ptr e) {
  if (auto n = relay_.afterFailedCollective(e)) abortOnProgress(*n, true);
}

// ---- NoticeLinks (for the abort relay) ----

std::vector<int> World::openPeers() const {
  std::vector<int> peers;
  for (int p = 0; p < nranks(); ++p)
    if (const auto& l = table_.current(p); l && !l->goodbyeSent()) peers.push_back(p);
  return peers;
}

void World::sendOpen(int peer, const std::vector<unsigned char>& payload) {
  // A write that failed at once may have closed an earlier peer's link: look again.
  if (const auto& l = table_.current(peer); l && !l->goodbyeSent()) sendControl(*l, wire::Kind::Abort, payload);
}

void World::sendDialling(int peer, const std::vector<unsigned char>& payload) {
  auto l = linkFor(peer);
  if (!l || l->goodbyeSent()) return;
  log::trace(rank(), "abort notice to rank {} down the abort tree", peer);
  sendControl(*l, wire::Kind::Abort, payload);
  if (life_.closing()) {  // a link opened while closing: it closes behind the notice
    l->sendGoodbye(wire::GoodbyeMode::Final);
    if (l->state() == link::Link::State::Closing) table_.setAside(*l);
  }
}

bool World::departed(int peer) const {
  const auto& st = table_.peer(peer);
  return st.gone || st.leaving;
}

Error World::peerGoneError(int peer, const std::string& opName) const {
  const auto& st = table_.peer(peer);
  std::string why = st.graceful ? failures::closedItsBootstrap() : st.reason;
  return Error(ErrorCode::PeerLost,
               failures::failure(failures::rankName(rank()), opName, failures::lostRank(peer, why)), rank(), peer);
}

void World::addCommunicator(std::uint64_t comm, std::shared_ptr<CollectiveSeq> seq) {
  asio::post(io_, [this, comm, seq = std::move(seq)]() mutable { sequences_.add(comm, std::move(seq)); });
}

void World::removeCommunicator(std::uint64_t comm) {
  if (closed_.load() || forked()) return;
  asio::post(io_, [this, comm] { sequences_.remove(comm); });
}

}  // namespace tether
