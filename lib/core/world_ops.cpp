// Operations on the progress thread: sending frames, posting receives,
// matching arriving frames on the full key, collective sequencing, and how
// operations wake and end.
#include <fmt/format.h>

#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <algorithm>
#include <cstring>

#include "base/log.hpp"
#include "core/world.hpp"

namespace tether {

std::string Op::name() const {
  switch (kind_) {
    case Kind::Send:
      return fmt::format("send to rank {} tag {}", peer_, tag_);
    case Kind::Recv:
      return fmt::format("recv from rank {} tag {}", peer_, tag_);
    case Kind::Collective:
      break;
  }
  if (child_) return fmt::format("{}#{} (comm {:016x})", wire::opName(static_cast<wire::OpCode>(code)), coll, comm);
  return fmt::format("{}#{}", wire::opName(static_cast<wire::OpCode>(code)), coll);
}

namespace {

Error lengthMismatch(int rank, const Op& op, int src, const wire::FrameHeader& h, std::size_t expected) {
  return Error(ErrorCode::Protocol,
               fmt::format("rank {}: {}: rank {} sent {}, this rank expects {} bytes", rank, op.name(), src,
                           wire::describe(h), expected),
               rank, src);
}

}  // namespace

// ---- sending and receiving ----

void World::sendFrame(Op& op, int dst, const wire::FrameHeader& h, const void* payload, bool reference) {
  if (op.error) std::rethrow_exception(op.error);
  if (dst == rank()) return deliverLocal(h, payload);
  auto link = linkFor(dst);
  if (!link) throw peerGoneError(dst, op.name());
  link->lastUsed = ++useClock_;
  log::trace(rank(), "queue {} to rank {}", h, dst);
  link::OutFrame f;
  wire::encodeHeader(h, f.header.data());
  f.len = h.length;
  if (reference && h.length > cfg_.eagerBytes) {
    f.ref = payload;
    f.owner = &op;
    ++op.outstanding;
  } else if (h.length) {
    auto* p = static_cast<const unsigned char*>(payload);
    f.owned.assign(p, p + h.length);
  }
  link->enqueue(std::move(f));
}

void World::postRecv(Op& op, const match::Key& key, void* buf, std::size_t len) {
  if (op.error) std::rethrow_exception(op.error);
  if (auto s = mailbox_.takeStashed(key)) {
    if (s->header.length != len) throw lengthMismatch(rank(), op, static_cast<int>(key.src), s->header, len);
    if (len) std::memcpy(buf, s->payload.data(), len);
    return;
  }
  const bool self = key.src == static_cast<std::uint32_t>(rank());
  if (!self && peers_[key.src].gone) throw peerGoneError(static_cast<int>(key.src), op.name());
  // A point-to-point receive from a rank we never talked to opens the link now
  // (the sender would open it anyway), so that rank's death shows as a refused
  // dial or EOF -> PeerLost instead of a wait until the deadline.
  if (key.kind == wire::Kind::P2P && !self) linkFor(static_cast<int>(key.src));
  mailbox_.post(key, match::Posted{buf, len, &op});
  op.posted.push_back(key);
  ++op.outstanding;
  // A frame parked on a link from key.src: read it into this receive if it is
  // this receive's, else into the stash (this receive comes behind it).
  if (!self)
    forEachLinkTo(static_cast<int>(key.src), [&](link::Link& l) {
      if (l.parked()) l.unpark(match::keyOf(key.src, *l.parked()) != key);
    });
}

asio::awaitable<void> World::settle(Op& op) {
  if (op.error) std::rethrow_exception(op.error);
  if (op.outstanding == 0) co_return;
  co_await asio::async_initiate<const asio::use_awaitable_t<>&, void(std::exception_ptr)>(
      [&op](auto handler) { op.waiter.emplace(std::move(handler)); }, asio::use_awaitable);
}

// Schedules the operation's coroutine to resume once the handler running now
// (a link's read or write completion, a timer) has returned: the driver runs
// resumeWoken between handlers. Never on a link's stack or in the middle of a
// frame, and without a trip through the event loop's queue (which would cost
// an extra epoll_wait per message).
void World::wake(Op& op) {
  if (!op.waiter || (!op.error && op.outstanding > 0)) return;
  woken_.emplace_back(std::move(*op.waiter), op.error);
  op.waiter.reset();
}

void World::resumeWoken() {
  while (!woken_.empty()) {
    auto ready = std::move(woken_);
    woken_.clear();
    for (auto& [handler, e] : ready) std::move(handler)(e);
  }
}

void World::failOp(Op& op, std::exception_ptr e) {
  if (op.error) return;
  op.error = e;
  for (const auto& k : op.posted) mailbox_.unpost(k, &op);
  op.posted.clear();
  forEachLink([&](link::Link& l) { op.draining += l.abandon(&op); });
  op.outstanding = 0;
  wake(op);
  // Something failed: parked frames are read now (into the stash), so that
  // what their peers sent behind them (an abort notice, a goodbye) is seen.
  forEachLink([](link::Link& l) { l.unpark(true); });
}

// The op's coroutine returned (e == nullptr) or threw. A coroutine that
// returned has had every frame it posted delivered; a failure recorded after
// its last settle completed (an abort notice read from the same socket right
// behind its last frame, while its resumption was queued) does not undo that.
void World::endOp(Op& op, std::exception_ptr& e) {
  if (op.seq) {
    op.seq->running.erase(op.coll);
    if (!e) {
      try {
        checkLeftovers(op);
      } catch (...) {
        e = std::current_exception();
      }
    }
  }
  if (e && op.seq) {
    op.seq->failedColl = op.coll;
    try {
      std::rethrow_exception(e);
    } catch (const Error& err) {
      op.seq->failedWhat = err.what();
      op.seq->failedPeer = err.peer();
    } catch (const std::exception& other) {
      op.seq->failedWhat = other.what();
      op.seq->failedPeer = -1;
    }
  }
  if (e && !op.error) failOp(op, e);  // withdraw what it still had posted
  if (e && op.seq && op.comm == cfg_.worldId) abortAfterFailedCollective(e);
  activeOps_.erase(&op);
  op.active = false;
}

void World::failOpsOfPeer(int p, bool gone, bool graceful, link::Link& link) {
  std::vector<Op*> affected;
  if (gone)
    for (Op* op : activeOps_) {
      bool waits = std::any_of(op->posted.begin(), op->posted.end(),
                               [&](const match::Key& k) { return static_cast<int>(k.src) == p; });
      // A collective with p as a member cannot complete on every rank any more,
      // even if this rank is not waiting on p right now (graceful: p finished).
      bool member = !graceful && std::find(op->members.begin(), op->members.end(), p) != op->members.end();
      if (waits || member) affected.push_back(op);
    }
  for (link::Owner* o : link.ownersWithQueuedFrames()) {
    Op* op = static_cast<Op*>(o);
    if (std::find(affected.begin(), affected.end(), op) == affected.end()) affected.push_back(op);
  }
  for (Op* op : affected)
    failOp(*op, std::make_exception_ptr(gone ? peerGoneError(p, op->name())
                                             : Error(ErrorCode::PeerLost,
                                                     fmt::format("rank {}: {}: the connection to rank {} broke "
                                                                 "while it was being closed",
                                                                 rank(), op->name(), p),
                                                     rank(), p)));
}

bool World::awaits(int peer) const {
  return std::any_of(activeOps_.begin(), activeOps_.end(), [&](const Op* op) {
    return std::any_of(op->posted.begin(), op->posted.end(),
                       [&](const match::Key& k) { return static_cast<int>(k.src) == peer; });
  });
}

std::string World::pendingDescription(const Op& op) const {
  if (!op.posted.empty()) {
    const auto& k = op.posted.front();
    std::string what =
        k.kind == wire::Kind::P2P ? fmt::format("a message with tag {}", k.tag) : fmt::format("step {}", k.step);
    return fmt::format("waiting for {} from {}", what, describeRank(static_cast<int>(k.src)));
  }
  std::string sending;
  forEachLink([&](const link::Link& l) {
    auto owners = l.ownersWithQueuedFrames();
    if (sending.empty() && std::find(owners.begin(), owners.end(), &op) != owners.end())
      sending = fmt::format("waiting to send to {}", describeRank(l.peer()));
  });
  return sending.empty() ? "before completing" : sending;
}

// ---- matching ----

// Takes the oldest receive posted under the frame's key. Empty: there is
// none. A null op: there was one, but the lengths differ (that op failed).
std::optional<World::Claim> World::claimPosted(int src, const wire::FrameHeader& h) {
  auto key = match::keyOf(static_cast<std::uint32_t>(src), h);
  auto p = mailbox_.claimPosted(key);
  if (!p) return std::nullopt;
  Op* op = const_cast<Op*>(static_cast<const Op*>(p->owner));
  auto it = std::find(op->posted.begin(), op->posted.end(), key);
  if (it != op->posted.end()) op->posted.erase(it);
  if (p->len != h.length) {
    failOp(*op, std::make_exception_ptr(lengthMismatch(rank(), *op, src, h, p->len)));
    return Claim{nullptr, nullptr};
  }
  return Claim{op, p->buf};
}

// Hands a complete frame to the oldest receive posted under its key; false if
// there is none.
bool World::deliverToPosted(int src, const wire::FrameHeader& h, const unsigned char* payload) {
  auto claim = claimPosted(src, h);
  if (!claim) return false;
  if (!claim->op) return true;
  if (h.length) std::memcpy(claim->buf, payload, h.length);
  --claim->op->outstanding;
  wake(*claim->op);
  return true;
}

// A message to ourselves goes through the same matching as one from a peer.
void World::deliverLocal(const wire::FrameHeader& h, const void* payload) {
  auto* p = static_cast<const unsigned char*>(payload);
  if (deliverToPosted(rank(), h, p)) return;
  mailbox_.stash(match::keyOf(static_cast<std::uint32_t>(rank()), h),
                 match::Stashed{h, std::vector<unsigned char>(p, p + h.length)});
}

link::Target World::onDataHeader(link::Link& link, const wire::FrameHeader& h, bool mayWait) {
  const int src = link.peer();
  link.lastUsed = ++useClock_;
  log::trace(rank(), "frame {} from rank {}", h, src);
  if (auto claim = claimPosted(src, h)) {
    if (!claim->op) return link::Target{};
    return link::Target{link::Target::Where::Posted, claim->buf, claim->op};
  }
  if (h.kind == wire::Kind::Collective) {
    auto it = comms_.find(h.comm);
    if (it != comms_.end()) {
      const auto& seq = *it->second;
      if (seq.finished(h.coll)) {
        reportProtocol(h.comm, Error(ErrorCode::Protocol,
                                     fmt::format("rank {}: received {} from rank {}, but this rank has already "
                                                 "finished that collective (latest: #{})",
                                                 rank(), wire::describe(h), src, seq.started),
                                     rank(), src));
        return link::Target{};
      }
      auto run = seq.running.find(h.coll);
      if (run != seq.running.end() && wire::opCodeOf(h.tag) != run->second->code) {
        reportProtocol(
            h.comm, Error(ErrorCode::Protocol,
                          fmt::format("rank {}: {}: rank {} is in {} — the ranks called different collectives", rank(),
                                      run->second->name(), src, wire::describe(h)),
                          rank(), src));
        return link::Target{};
      }
    }
  }
  // A large block of a collective whose receive is not posted yet stays in
  // the socket until it is (postRecv unparks it): a stashed copy would double
  // this rank's memory for the call. Collective frames only: every member
  // posts its receives when it enters the call, while a point-to-point
  // message may be received after the sender's next one (and a sender must
  // not wait for its receiver to post).
  if (mayWait && h.kind == wire::Kind::Collective && h.length > cfg_.eagerBytes && !abort_.aborted())
    return link::Target{link::Target::Where::Wait, nullptr, nullptr};
  return link::Target{link::Target::Where::Stash, nullptr, nullptr};
}

void World::onDataComplete(link::Link& link, const wire::FrameHeader& h, const link::Target& t,
                           std::vector<unsigned char>&& stashed) {
  switch (t.where) {
    case link::Target::Where::Posted: {
      Op* op = static_cast<Op*>(t.owner);
      if (!op->error) {
        --op->outstanding;
        wake(*op);
      }
      break;
    }
    case link::Target::Where::Stash: {
      // A receive may have been posted while the payload was arriving.
      if (deliverToPosted(link.peer(), h, stashed.data())) break;
      auto key = match::keyOf(static_cast<std::uint32_t>(link.peer()), h);
      if (!mailbox_.stash(key, match::Stashed{h, std::move(stashed)}))
        reportProtocol(
            h.comm, Error(ErrorCode::Protocol,
                          fmt::format("rank {}: rank {} sent {} twice", rank(), link.peer(), wire::describe(h)), rank(),
                          link.peer()));
      break;
    }
    case link::Target::Where::Discard:
    case link::Target::Where::Wait:  // never completes: the link asks again after unpark()
      break;
  }
}

// ---- collective sequencing ----

void World::beginCollective(CollectiveSeq& seq, Op& op) {
  seq.started = std::max(seq.started, op.coll);
  seq.running[op.coll] = &op;
  if (seq.poison) return failOp(op, seq.poison);
  // A member that already died (not one that said goodbye) means this
  // collective cannot complete: fail now, naming it, instead of at the deadline.
  for (int m : op.members)
    if (m != rank() && peers_[m].gone && !peers_[m].graceful)
      return failOp(op, std::make_exception_ptr(peerGoneError(m, op.name())));
  checkStashedAgainst(op);
}

// A frame already waiting for this collective id but naming another operation
// means the ranks called different collectives: say so, naming both.
void World::checkStashedAgainst(Op& op) {
  std::optional<Error> mismatch;
  mailbox_.forEachStashed([&](const match::Key& k, const match::Stashed& s) {
    if (mismatch || k.kind != wire::Kind::Collective || k.comm != op.comm || k.coll != op.coll) return;
    if (wire::opCodeOf(k.tag) != op.code)
      mismatch = Error(ErrorCode::Protocol,
                       fmt::format("rank {}: {}: rank {} is in {} — the ranks called different collectives", rank(),
                                   op.name(), k.src, wire::describe(s.header)),
                       rank(), static_cast<int>(k.src));
  });
  if (mismatch) failOp(op, std::make_exception_ptr(*mismatch));
}

// Every frame of a finished collective has been consumed by a receive; one
// left over was sent by a rank that ran a different algorithm or operation.
void World::checkLeftovers(Op& op) {
  std::optional<Error> extra;
  auto ofThisCall = [&](const match::Key& k) {
    return k.kind == wire::Kind::Collective && k.comm == op.comm && k.coll == op.coll;
  };
  mailbox_.forEachStashed([&](const match::Key& k, const match::Stashed& s) {
    if (!extra && ofThisCall(k))
      extra = Error(ErrorCode::Protocol,
                    fmt::format("rank {}: {}: rank {} sent {} which this rank's {} never receives", rank(), op.name(),
                                k.src, wire::describe(s.header), op.name()),
                    rank(), static_cast<int>(k.src));
  });
  if (!extra) return;
  mailbox_.dropStashed(ofThisCall);
  throw *extra;
}

// A frame that breaks a communicator's sequence: every collective running on
// it fails; if none runs, the next one will.
void World::reportProtocol(std::uint64_t comm, const Error& e) {
  log::warn(rank(), "{}", e.what());
  auto it = comms_.find(comm);
  if (it == comms_.end()) return;
  auto& seq = *it->second;
  if (seq.running.empty()) {
    if (!seq.poison) seq.poison = std::make_exception_ptr(e);
    return;
  }
  std::vector<Op*> ops;
  for (auto& [coll, op] : seq.running) ops.push_back(op);
  for (Op* op : ops) failOp(*op, std::make_exception_ptr(e));
}

}  // namespace tether
