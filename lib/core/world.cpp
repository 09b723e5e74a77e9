// World (world.hpp): the wiring of the core units; bring-up (listener,
// rendezvous, event loop), abort and orderly close.
#include "core/world.hpp"

#include <fmt/format.h>

#include <boost/asio/post.hpp>
#include <algorithm>

#include "base/bytes.hpp"
#include "base/endpoint.hpp"
#include "base/env.hpp"
#include "base/log.hpp"
#include "link/socket_stream.hpp"
#include "link/tcp_stream.hpp"
#include "wire/notice.hpp"

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

// Peers and Calls are given references to units constructed after them; they
// use none of them before this constructor's body has run.
World::World(WorldConfig config)
    : cfg_(std::move(config)),
      peers_(cfg_, {table_, connector_, life_, ops_, sequences_, probe_, relay_, links_, calls_, awaitWatch_},
             [this](const wire::AbortNotice& n, int from) { abortOnProgress(n, true, from); }),
      calls_(cfg_,
             {io_, driver_, ops_, sequences_, windows_, payloads_, table_, peers_, life_, abort_, relay_, probe_,
              awaitWatch_, closed_},
             [this](const wire::AbortNotice& n) { abortOnProgress(n, true); }),
      admission_(cfg_.rank, table_, life_, abort_, [this] { peers_.enforceBudget(); }),
      connector_(io_, connectorConfig(cfg_), admission_, std::make_unique<link::TcpDialer>(io_, tcpOptions(cfg_))),
      host_(io_, cfg_.rank, cfg_.timeout, table_, connector_,
            {[this](std::exception_ptr e) { finishInit(std::move(e)); },
             [this](const std::string& reason) {
               abortOnProgress({static_cast<std::uint32_t>(rank()), reason, wire::kNoRank}, true);
             },
             [this](rdv::Phase p) { init_.mark(p); }, [this](int peer) { peers_.countDial(peer); }}),
      table_(io_, peers_, cfg_.rank, cfg_.nranks, cfg_.maxPayload),
      abort_(cfg_.rank, cfg_.nranks),
      probe_(io_, cfg_.rank,
             [this](int peer, wire::Kind kind, const std::vector<unsigned char>& payload) {
               return peers_.sendControlTo(peer, kind, payload);
             }),
      awaitWatch_(io_, [this](int peer) { peers_.dialIfStillAwaited(peer); }) {
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
  peers_.setRendezvous(*rendezvous_);
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

World::~World() {
  close(std::min(cfg_.timeout, std::chrono::milliseconds(5000)), cfg_.timeout);
  calls_.closed();  // its timer before io_, which is destroyed first
}

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
  calls_.failHeldSends();  // nothing may be queued behind the goodbyes
  // The listener stays open until the drain ends (R7): a peer may still be
  // dialling us to deliver frames, or answer our own last dial.
  // Links still dialling carry queued frames too (a last small send is
  // fire-and-forget, an abort notice): they get the goodbye behind them and
  // are waited for. After a failed rendezvous nothing queued is worth
  // waiting for. Not after an abort either: the peer may have admitted the
  // dial already, and a connection closed without a goodbye would make it
  // report this (healthy) rank as lost.
  peers_.sayGoodbye([this](int peer) { return !life_.joined() || relay_.unavailable(peer); });
  // Let queued frames reach the peers and be read (bounded), then close.
  drainTimer_.emplace(io_);
  armDrain(done, drain);
  peers_.watchDrain([this](int open) {
    if (life_.linksOpen(open)) drainTimer_->cancel();
  });
  peers_.checkDrained();
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
    peers_.failAll("shutting down");
    done->complete(nullptr);
  });
}

void World::abort(int origin, const std::string& reason) {
  checkProcess("abort");
  const wire::AbortNotice n{static_cast<std::uint32_t>(origin), reason, wire::kNoRank};
  abort_.record(n);
  asio::post(io_, [this, n] { abortOnProgress(n, true); });
}

void World::abortOnProgress(const wire::AbortNotice& n, bool notifyPeers, int from) {
  if (!relay_.handle(n, notifyPeers, from, life_.joined())) return;
  ops_.failAll([&](const Op& op) { return abort_.abortedError(op.name(), *op.names); });
  if (life_.joining()) {
    auto error = abort_.abortedError("rendezvous");
    rendezvous_->onAborted(error.what());
    finishInit(std::make_exception_ptr(error));
  }
}

// An observer (tether-status) asks this rank as a whole, and for every
// rank's address once the world holds them.
ObserverDesk::Answers World::observerAnswers() {
  ObserverDesk::Answers a;
  a.status = [this](const wire::StatusQuery& q) {
    RankFacts facts{rank(), nranks(), table_.openCount(), calls_.lastError(), Clock::now()};
    if (facts.lastError.empty() && abort_.aborted()) facts.lastError = abort_.abortedError("this world").what();
    return statusOfRank(q.id, ops_, facts);
  };
  a.table = [this]() -> std::optional<wire::Bytes> {
    if (!life_.joined()) return std::nullopt;
    std::vector<PeerAddress> all;
    all.reserve(static_cast<std::size_t>(nranks()));
    for (int r = 0; r < nranks(); ++r) all.push_back(address(r));
    return wire::encodeTable(all);
  };
  return a;
}

void World::addCommunicator(std::uint64_t comm, std::shared_ptr<CollectiveSeq> seq) {
  asio::post(io_, [this, comm, seq = std::move(seq)]() mutable { sequences_.add(comm, std::move(seq)); });
}

void World::removeCommunicator(std::uint64_t comm) {
  if (closed_.load() || forked()) return;
  asio::post(io_, [this, comm] {
    sequences_.remove(comm);
    windows_.coll.forgetComm(comm);
  });
}

}  // namespace tether
