// World lifecycle: listener and progress thread, running blocking calls with
// deadlines, abort, link bookkeeping and orderly shutdown.
#include "core/world.hpp"

#include <fmt/format.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <algorithm>

#include "base/endpoint.hpp"
#include "base/log.hpp"
#include "link/link.hpp"
#include "rendezvous/reserved_listener.hpp"
#include "base/bytes.hpp"

namespace tether {

using Clock = std::chrono::steady_clock;

World::World(WorldConfig config)
    : cfg_(std::move(config)),
      acceptor_(io_),
      links_(cfg_.nranks),
      peers_(cfg_.nranks) {}

std::shared_ptr<World> World::create(WorldConfig config) {
  auto deadline = Clock::now() + config.timeout;
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
    asio::post(w->io_, [raw = w.get()] {
      raw->finishInit(std::make_exception_ptr(
          Error(ErrorCode::Timeout, raw->rendezvousTimeoutText(), raw->rank(), raw->rank() == 0 ? -1 : 0)));
    });
    w->driver_.wait(w->initDone_);
  }
  try {
    w->initDone_.rethrowIfFailed();
  } catch (const std::exception& e) {
    // The root knows who is missing: tell the ranks that did register why,
    // instead of letting them wait for their own deadline. ~World then drains
    // the notice and closes.
    if (w->rank() == 0) {
      std::string reason = e.what();
      asio::post(w->io_, [raw = w.get(), reason] { raw->abortOnProgress(raw->rank(), reason, true); });
    }
    throw;
  }
  return w;
}

void World::start() {
  // Listener first: peers may dial us as soon as the root publishes the table.
  boost::system::error_code ec;
  if (rank() == 0) {
    auto rootAddr = toPeerAddress(cfg_.root, 0);
    if (auto fd = reserved::take(rootAddr)) {
      acceptor_.assign(cfg_.root.protocol(), *fd, ec);
    } else {
      acceptor_.open(cfg_.root.protocol(), ec);
      if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
      if (!ec) acceptor_.bind(cfg_.root, ec);
      if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    }
    if (ec)
      throw Error(ErrorCode::System,
                  fmt::format("rank 0: cannot listen on the root address {}: {}", toString(cfg_.root), ec.message()),
                  0);
  } else {
    reserved::release(toPeerAddress(cfg_.root, 0));  // an inherited reservation is rank 0's, not ours
    tcp::endpoint ep(chooseListenAddress(cfg_.root.address(), cfg_.listenHost), 0);
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
      throw Error(ErrorCode::System,
                  fmt::format("rank {}: cannot listen on {}: {}", rank(), toString(ep), ec.message()), rank());
  }
  auto local = acceptor_.local_endpoint();
  tcp::endpoint advertised = local;
  std::string override = cfg_.advertiseFor ? cfg_.advertiseFor(toString(local)) : cfg_.advertise;
  if (!override.empty()) {
    auto hp = parseHostPort(override);
    advertised = tcp::endpoint(resolveHost(hp.host), hp.port);
  }
  self_ = toPeerAddress(advertised, thisHostId());
  log::info(rank(), "listening on {} (advertised as {})", toString(local), toString(advertised));

  work_.emplace(io_.get_executor());
  driver_.start();
  asio::post(io_, [this] {
    asio::co_spawn(io_, acceptLoop(), asio::detached);
    startRendezvous();
  });
}

World::~World() { shutdown(); }

void World::shutdown() {
  if (!work_) return;
  auto done = std::make_shared<Completion>();
  asio::post(io_, [this, done] {
    shuttingDown_ = true;
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    // Links still dialling carry queued frames too (a last small send is
    // fire-and-forget): they get the goodbye behind them and are waited for.
    // After a failed rendezvous nothing queued is worth waiting for.
    for (auto& l : links_)
      if (l && l->state() == Link::State::Dialing && !initOk_) l->fail("shutting down after a failed rendezvous");
    for (auto& l : links_)
      if (l && l->state() != Link::State::Closed) sendControl(*l, wire::Kind::Goodbye, {});
    // Let queued frames reach the peers and be read (bounded), then close.
    drainTimer_.emplace(io_);
    drainTimer_->expires_after(std::min(cfg_.timeout, std::chrono::milliseconds(5000)));
    drainTimer_->async_wait([this, done](boost::system::error_code) {
      for (auto& l : links_)
        if (l) l->fail("shutting down");
      done->complete(nullptr);
    });
    onLinkIdle();
  });
  driver_.wait(*done);
  driver_.stop();
  work_.reset();
}

void World::onLinkIdle() {
  // Done when every link is closed or its peer confirmed reading our goodbye
  // (and so every frame before it).
  for (auto& l : links_)
    if (l && l->state() != Link::State::Closed && !l->goodbyeAcked()) return;
  if (drainTimer_) drainTimer_->cancel();
}

void World::run(const std::shared_ptr<Op>& op, std::function<asio::awaitable<void>(Op&)> body,
                Clock::time_point deadline) {
  if (aborted_.load()) throw abortedError(op->name());
  auto done = std::make_shared<Completion>();
  asio::post(io_, [this, op, body = std::move(body), done]() mutable {
    if (abortHandled_) return done->complete(std::make_exception_ptr(abortedError(op->name())));
    activeOps_.insert(op.get());
    op->active = true;
    asio::co_spawn(io_, body(*op), [this, op, done](std::exception_ptr e) {
      if (!e && op->error) e = op->error;
      if (!e) {
        try {
          finishOp(*op);
        } catch (...) {
          e = std::current_exception();
        }
      } else if (op->coll) {
        comms_[op->comm].op = nullptr;
      }
      if (e && !op->error) failOp(*op, e);  // withdraw what it still had posted
      if (e && op->coll && op->comm == cfg_.worldId) abortAfterFailedCollective(e);
      activeOps_.erase(op.get());
      op->active = false;
      if (op->draining > 0)  // a link still uses its buffer (Link::abandon)
        op->afterDrain = [done, e] { done->complete(e); };
      else
        done->complete(e);
    });
  });
  if (!driver_.waitUntil(*done, deadline)) {
    asio::post(io_, [this, op] {
      if (!op->active) return;
      failOp(*op, std::make_exception_ptr(Error(
                      ErrorCode::Timeout,
                      fmt::format("rank {}: {}: timed out {}", rank(), op->name(), pendingDescription(*op)), rank(),
                      op->posted.empty() ? -1 : static_cast<int>(op->posted.front().src))));
    });
    driver_.wait(*done);
  }
  done->rethrowIfFailed();
}

std::string World::pendingDescription(const Op& op) const {
  if (!op.posted.empty()) {
    const auto& k = op.posted.front();
    std::string what = k.kind == wire::Kind::P2P
                           ? fmt::format("a message with tag {}", k.tag)
                           : fmt::format("step {}", k.step);
    return fmt::format("waiting for {} from {}", what, describeRank(static_cast<int>(k.src)));
  }
  for (const auto& l : links_) {
    if (!l) continue;
    auto ops = l->opsWithQueuedFrames();
    if (std::find(ops.begin(), ops.end(), &op) != ops.end())
      return fmt::format("waiting to send to {}", describeRank(l->peer()));
  }
  return "before completing";
}

std::string World::describeRank(int worldRank) const {
  if (worldRank < 0 || worldRank >= nranks()) return fmt::format("rank {}", worldRank);
  const auto& l = links_[worldRank];
  if (l && !l->remote().empty()) return fmt::format("rank {} ({})", worldRank, l->remote());
  return fmt::format("rank {}", worldRank);
}

void World::abort(int origin, const std::string& reason) {
  {
    std::lock_guard lock(abortMutex_);
    if (!aborted_.load()) {
      abortOrigin_ = origin;
      abortReason_ = reason;
      aborted_.store(true);
    }
  }
  asio::post(io_, [this, origin, reason] { abortOnProgress(origin, reason, true); });
}

Error World::abortedError(const std::string& opName) const {
  std::lock_guard lock(abortMutex_);
  std::string by = abortOrigin_ == rank() ? std::string("aborted on this rank")
                                          : fmt::format("aborted by rank {}", abortOrigin_);
  return Error(ErrorCode::Aborted, fmt::format("rank {}: {}: {}: {}", rank(), opName, by, abortReason_), rank(),
               abortOrigin_);
}

void World::abortOnProgress(int origin, const std::string& reason, bool notifyPeers) {
  if (abortHandled_) return;
  abortHandled_ = true;
  {
    std::lock_guard lock(abortMutex_);
    if (!aborted_.load()) {
      abortOrigin_ = origin;
      abortReason_ = reason;
      aborted_.store(true);
    }
  }
  if (origin != rank()) log::warn(rank(), "rank {} aborted: {}", origin, reason);
  if (notifyPeers) {
    std::vector<unsigned char> payload;
    ByteWriter w(payload);
    w.u32(static_cast<std::uint32_t>(origin));
    w.str(reason);
    for (auto& l : links_)
      if (l && l->state() != Link::State::Closed && l->peer() != origin) sendControl(*l, wire::Kind::Abort, payload);
  }
  std::vector<Op*> ops(activeOps_.begin(), activeOps_.end());
  for (Op* op : ops) failOp(*op, std::make_exception_ptr(abortedError(op->name())));
  if (!initComplete_) finishInit(std::make_exception_ptr(abortedError("rendezvous")));
}

void World::sendControl(Link& link, wire::Kind kind, const std::vector<unsigned char>& payload) {
  OutFrame f;
  wire::FrameHeader h;
  h.kind = kind;
  h.length = payload.size();
  wire::encodeHeader(h, f.header.data());
  f.owned = payload;
  f.len = payload.size();
  link.enqueue(std::move(f));
}

std::shared_ptr<Link> World::linkFor(int peer) {
  auto& l = links_[peer];
  if (l && l->state() != Link::State::Closed) return l;
  if (peers_[peer].gone || l) return nullptr;
  l = std::make_shared<Link>(*this, peer);
  asio::co_spawn(io_, dialPeer(peer, toEndpoint(table_[peer]), false), asio::detached);
  return l;
}

std::optional<wire::Reject> World::admit(int peer, const wire::Hello&, const std::string& remote) {
  using wire::RejectCode;
  if (peer < 0 || peer >= nranks() || peer == rank())
    return wire::Reject{RejectCode::BadRank, fmt::format("rank {} is not a peer of rank {} in a world of {}", peer,
                                                         rank(), nranks())};
  if (shuttingDown_) return wire::Reject{RejectCode::ShuttingDown, "this rank is shutting down"};
  auto& l = links_[peer];
  if (l && l->state() == Link::State::Up && l->dialedByUs() && peer > rank())
    return wire::Reject{RejectCode::Simultaneous, "both ranks dialled; the lower rank's connection is kept"};
  if (peers_[peer].gone || (l && l->state() == Link::State::Up)) {
    std::string why = fmt::format("rank {} is already connected{}", peer,
                                  l && !l->remote().empty() ? " from " + l->remote() : std::string());
    if (rank() == 0 && !initComplete_) {
      // Two processes claim the same rank: the job is misconfigured; stop it.
      abortOnProgress(0, fmt::format("two processes claim rank {} (second from {})", peer, remote), true);
    }
    return wire::Reject{RejectCode::DuplicateRank, why};
  }
  if (l && l->state() == Link::State::Dialing && peer > rank())
    return wire::Reject{RejectCode::Simultaneous, "both ranks dialled; the lower rank's connection is kept"};
  // Reserve the link now: a send to this peer while our welcome is on its way
  // must wait for this connection, not dial a second one (which the peer,
  // still waiting for our welcome, could accept too — each side would then
  // keep a different connection).
  if (!l) l = std::make_shared<Link>(*this, peer);
  return std::nullopt;
}

void World::attach(int peer, tcp::socket socket, bool dialedByUs) {
  auto& l = links_[peer];
  if (!l) l = std::make_shared<Link>(*this, peer);
  if (l->state() != Link::State::Dialing) {
    boost::system::error_code ignored;
    socket.close(ignored);
    return;
  }
  l->attach(std::move(socket), dialedByUs);
  log::trace(rank(), "link to rank {} is up ({})", peer, l->remote());
}

void World::onDialFailed(int peer, const std::string& reason, bool) {
  auto& l = links_[peer];
  if (!l || l->state() != Link::State::Dialing) return;
  l->fail(reason);
  linkIdle();
}

void World::onLinkDown(Link& link, const std::string& reason, bool graceful) {
  int p = link.peer();
  auto& st = peers_[p];
  if (st.gone) return;
  st.gone = true;
  st.graceful = graceful;
  st.reason = reason;
  if (shuttingDown_) return onLinkIdle();
  if (!graceful) log::warn(rank(), "lost {}: {}", describeRank(p), reason);
  std::vector<Op*> affected;
  for (Op* op : activeOps_) {
    bool waits = std::any_of(op->posted.begin(), op->posted.end(),
                             [&](const match::Key& k) { return static_cast<int>(k.src) == p; });
    // A collective with p as a member cannot complete on every rank any more,
    // even if this rank is not waiting on p right now (graceful: p finished).
    bool member = !graceful && std::find(op->members.begin(), op->members.end(), p) != op->members.end();
    if (waits || member) affected.push_back(op);
  }
  for (Op* op : link.opsWithQueuedFrames())
    if (std::find(affected.begin(), affected.end(), op) == affected.end()) affected.push_back(op);
  for (Op* op : affected) failOp(*op, std::make_exception_ptr(peerGoneError(p, op->name())));
  if (!initComplete_ && (p == 0 || rank() == 0)) {
    finishInit(std::make_exception_ptr(peerGoneError(p, "rendezvous")));
    // The rendezvous cannot complete without p: tell the ranks already
    // registered now rather than let them wait for their deadline.
    if (rank() == 0) abortOnProgress(0, fmt::format("rendezvous failed: lost rank {}: {}", p, reason), true);
  }
}

// A world collective that failed here leaves every other rank waiting for
// steps this rank will never send: send them an abort notice (origin: this
// rank, reason: the error) so they fail now with Aborted instead of at their
// deadline. Only the world communicator: a child communicator's failure must
// not stop ranks outside it, and point-to-point failures concern two ranks.
void World::abortAfterFailedCollective(std::exception_ptr e) {
  if (abortHandled_) return;
  try {
    std::rethrow_exception(e);
  } catch (const Error& err) {
    if (err.code() == ErrorCode::PeerLost || err.code() == ErrorCode::Protocol || err.code() == ErrorCode::Timeout)
      abortOnProgress(rank(), err.what(), true);
  } catch (...) {
  }
}

Error World::peerGoneError(int peer, const std::string& opName) const {
  const auto& st = peers_[peer];
  std::string why = st.graceful ? "it closed its bootstrap" : st.reason;
  return Error(ErrorCode::PeerLost, fmt::format("rank {}: {}: lost rank {}: {}", rank(), opName, peer, why), rank(),
               peer);
}

}  // namespace tether
