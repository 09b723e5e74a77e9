// Operations on the progress thread: sending frames, posting receives,
// matching arriving frames on the full key, and ending operations.
#include <fmt/format.h>
#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <algorithm>
#include <cstring>

#include "base/log.hpp"
#include "core/world.hpp"
#include "link/link.hpp"
#include "base/bytes.hpp"

namespace tether {

std::string Op::name() const {
  switch (kind_) {
    case Kind::Send: return fmt::format("send to rank {} tag {}", peer_, tag_);
    case Kind::Recv: return fmt::format("recv from rank {} tag {}", peer_, tag_);
    case Kind::Collective: break;
  }
  return fmt::format("{}#{}", wire::opName(static_cast<wire::OpCode>(code)), coll);
}

void World::sendFrame(Op& op, int dst, const wire::FrameHeader& h, const void* payload, bool reference) {
  if (op.error) std::rethrow_exception(op.error);
  if (dst == rank()) return deliverLocal(h, payload);
  auto link = linkFor(dst);
  if (!link) throw peerGoneError(dst, op.name());
  log::trace(rank(), "queue {} to rank {}", h, dst);
  OutFrame f;
  wire::encodeHeader(h, f.header.data());
  f.len = h.length;
  if (reference && h.length > cfg_.eagerBytes) {
    f.ref = payload;
    f.op = &op;
    ++op.outstanding;
  } else if (h.length) {
    auto* p = static_cast<const unsigned char*>(payload);
    f.owned.assign(p, p + h.length);
  }
  link->enqueue(std::move(f));
}

// Hands a complete frame to the oldest receive posted under its key; false if
// there is none.
bool World::deliverToPosted(int src, const wire::FrameHeader& h, const unsigned char* payload) {
  auto key = match::keyOf(static_cast<std::uint32_t>(src), h);
  auto posted = mailbox_.claimPosted(key);
  if (!posted) return false;
  Op* owner = const_cast<Op*>(static_cast<const Op*>(posted->owner));
  auto it = std::find(owner->posted.begin(), owner->posted.end(), key);
  if (it != owner->posted.end()) owner->posted.erase(it);
  if (posted->len != h.length) {
    failOp(*owner, std::make_exception_ptr(Error(
                       ErrorCode::Protocol,
                       fmt::format("rank {}: {}: rank {} sent {}, this rank expects {} bytes", rank(), owner->name(),
                                   src, wire::describe(h), posted->len),
                       rank(), src)));
    return true;
  }
  if (h.length) std::memcpy(posted->buf, payload, h.length);
  --owner->outstanding;
  wake(*owner);
  return true;
}

// A message to ourselves goes through the same matching as one from a peer.
void World::deliverLocal(const wire::FrameHeader& h, const void* payload) {
  auto* p = static_cast<const unsigned char*>(payload);
  if (deliverToPosted(rank(), h, p)) return;
  mailbox_.stash(match::keyOf(static_cast<std::uint32_t>(rank()), h),
                 match::Stashed{h, std::vector<unsigned char>(p, p + h.length)});
}

void World::postRecv(Op& op, const match::Key& key, void* buf, std::size_t len) {
  if (op.error) std::rethrow_exception(op.error);
  if (auto s = mailbox_.takeStashed(key)) {
    if (s->header.length != len)
      throw Error(ErrorCode::Protocol,
                  fmt::format("rank {}: {}: rank {} sent {}, this rank expects {} bytes", rank(), op.name(), key.src,
                              wire::describe(s->header), len),
                  rank(), static_cast<int>(key.src));
    if (len) std::memcpy(buf, s->payload.data(), len);
    return;
  }
  if (key.src != static_cast<std::uint32_t>(rank()) && peers_[key.src].gone) throw peerGoneError(key.src, op.name());
  // A point-to-point receive from a rank we never talked to opens the link now
  // (the sender would open it anyway), so that rank's death shows as a refused
  // dial or EOF -> PeerLost instead of a wait until the deadline.
  if (key.kind == wire::Kind::P2P && key.src != static_cast<std::uint32_t>(rank())) linkFor(static_cast<int>(key.src));
  mailbox_.post(key, match::Posted{buf, len, &op});
  op.posted.push_back(key);
  ++op.outstanding;
}

asio::awaitable<void> World::settle(Op& op) {
  if (op.error) std::rethrow_exception(op.error);
  if (op.outstanding == 0) co_return;
  co_await asio::async_initiate<const asio::use_awaitable_t<>&, void(std::exception_ptr)>(
      [&op](auto handler) { op.waiter.emplace(std::move(handler)); }, asio::use_awaitable);
}

// Resumes the operation's coroutine right here, on the progress thread, rather
// than through the scheduler's queue: one wake-up per message, no extra
// epoll round. Callers (frame delivery, write completion, failOp) hold no
// iterators across this call.
void World::wake(Op& op) {
  if (!op.waiter || (!op.error && op.outstanding > 0)) return;
  auto handler = std::move(*op.waiter);
  op.waiter.reset();
  std::move(handler)(op.error);
}

void World::failOp(Op& op, std::exception_ptr e) {
  if (op.error) return;
  op.error = e;
  for (const auto& k : op.posted) mailbox_.unpost(k, &op);
  op.posted.clear();
  for (auto& l : links_)
    if (l) l->abandon(&op);
  op.outstanding = 0;
  wake(op);
}

void World::releaseDrain(Op& op) {
  if (--op.draining > 0 || !op.afterDrain) return;
  auto then = std::move(op.afterDrain);
  op.afterDrain = nullptr;
  then();
}

void World::completeReferencedSend(Op& op) {
  if (op.error) return;
  --op.outstanding;
  wake(op);
}

void World::setCurrentCollective(std::uint64_t comm, std::uint64_t coll, Op* op) {
  auto& st = comms_[comm];
  st.current = coll;
  st.op = op;
  if (!op) return;
  if (st.poison) {
    auto e = st.poison;
    failOp(*op, e);
    return;
  }
  // A member that already died (not one that said goodbye) means this
  // collective cannot complete: fail now, naming it, instead of at the deadline.
  for (int m : op->members)
    if (m != rank() && peers_[m].gone && !peers_[m].graceful)
      return failOp(*op, std::make_exception_ptr(peerGoneError(m, op->name())));
  checkStashedAgainst(*op);
}

// A frame already waiting for this collective id but naming another operation
// means the ranks called different collectives: say so, naming both.
void World::checkStashedAgainst(Op& op) {
  std::optional<Error> mismatch;
  mailbox_.forEachStashed([&](const match::Key& k, const match::Stashed& s) {
    if (mismatch || k.kind != wire::Kind::Collective || k.comm != op.comm || k.coll != op.coll) return;
    if (k.tag != op.code)
      mismatch = Error(ErrorCode::Protocol,
                       fmt::format("rank {}: {}: rank {} is in {} — the ranks called different collectives", rank(),
                                   op.name(), k.src, wire::describe(s.header)),
                       rank(), static_cast<int>(k.src));
  });
  if (mismatch) failOp(op, std::make_exception_ptr(*mismatch));
}

void World::finishOp(Op& op) {
  if (op.coll == 0) return;
  comms_[op.comm].op = nullptr;
  if (op.error) return;
  // Every frame of this collective has been consumed by a receive; one left
  // over was sent by a rank that ran a different algorithm or operation.
  std::optional<Error> extra;
  mailbox_.forEachStashed([&](const match::Key& k, const match::Stashed& s) {
    if (!extra && k.kind == wire::Kind::Collective && k.comm == op.comm && k.coll == op.coll)
      extra = Error(ErrorCode::Protocol,
                    fmt::format("rank {}: {}: rank {} sent {} which this rank's {} never receives", rank(), op.name(),
                                k.src, wire::describe(s.header), op.name()),
                    rank(), static_cast<int>(k.src));
  });
  if (extra) {
    mailbox_.dropStashed([&](const match::Key& k) {
      return k.kind == wire::Kind::Collective && k.comm == op.comm && k.coll == op.coll;
    });
    throw *extra;
  }
}

void World::reportProtocol(std::uint64_t comm, const Error& e) {
  log::warn(rank(), "{}", e.what());
  auto it = comms_.find(comm);
  if (it != comms_.end() && it->second.op) return failOp(*it->second.op, std::make_exception_ptr(e));
  if (it != comms_.end() && !it->second.poison) it->second.poison = std::make_exception_ptr(e);
}

Target World::onDataHeader(Link& link, const wire::FrameHeader& h) {
  auto key = match::keyOf(static_cast<std::uint32_t>(link.peer()), h);
  log::trace(rank(), "frame {} from rank {}", h, link.peer());
  if (auto p = mailbox_.claimPosted(key)) {
    Op* op = const_cast<Op*>(static_cast<const Op*>(p->owner));
    auto it = std::find(op->posted.begin(), op->posted.end(), key);
    if (it != op->posted.end()) op->posted.erase(it);
    if (h.length != p->len) {
      failOp(*op, std::make_exception_ptr(Error(
                      ErrorCode::Protocol,
                      fmt::format("rank {}: {}: rank {} sent {}, this rank expects {} bytes", rank(), op->name(),
                                  link.peer(), wire::describe(h), p->len),
                      rank(), link.peer())));
      return Target{};
    }
    return Target{Target::Where::Posted, p->buf, op};
  }
  if (h.kind == wire::Kind::Collective) {
    auto it = comms_.find(h.comm);
    if (it != comms_.end()) {
      const auto& st = it->second;
      bool finished = h.coll < st.current || (h.coll == st.current && !st.op);
      if (finished) {
        reportProtocol(h.comm, Error(ErrorCode::Protocol,
                                     fmt::format("rank {}: received {} from rank {}, but this rank has already "
                                                 "finished that collective (latest: #{})",
                                                 rank(), wire::describe(h), link.peer(), st.current),
                                     rank(), link.peer()));
        return Target{};
      }
      if (st.op && h.coll == st.current && h.tag != st.op->code) {
        reportProtocol(h.comm, Error(ErrorCode::Protocol,
                                     fmt::format("rank {}: {}: rank {} is in {} — the ranks called different "
                                                 "collectives",
                                                 rank(), st.op->name(), link.peer(), wire::describe(h)),
                                     rank(), link.peer()));
        return Target{};
      }
    }
  }
  return Target{Target::Where::Stash, nullptr, nullptr};
}

void World::onDataComplete(Link& link, const wire::FrameHeader& h, const Target& t,
                           std::vector<unsigned char>&& stashed) {
  switch (t.where) {
    case Target::Where::Posted:
      if (!t.op->error) {
        --t.op->outstanding;
        wake(*t.op);
      }
      break;
    case Target::Where::Stash: {
      // A receive may have been posted while the payload was arriving.
      if (deliverToPosted(link.peer(), h, stashed.data())) break;
      auto key = match::keyOf(static_cast<std::uint32_t>(link.peer()), h);
      if (!mailbox_.stash(key, match::Stashed{h, std::move(stashed)}))
        reportProtocol(h.comm, Error(ErrorCode::Protocol,
                                     fmt::format("rank {}: rank {} sent {} twice", rank(), link.peer(),
                                                 wire::describe(h)),
                                     rank(), link.peer()));
      break;
    }
    case Target::Where::Discard:
      break;
  }
}

void World::onControlFrame(Link& link, const wire::FrameHeader& h, std::vector<unsigned char>&& payload) {
  try {
    switch (h.kind) {
      case wire::Kind::Register:
        onRegister(link.peer(), wire::decodeRegister(payload));
        return;
      case wire::Kind::Table:
        onTable(link.peer(), wire::decodeTable(payload, static_cast<std::uint32_t>(nranks())));
        return;
      case wire::Kind::Abort: {
        ByteReader r(payload.data(), payload.size());
        int origin = static_cast<int>(r.u32());
        std::string reason = r.str();
        abortOnProgress(origin, reason, true);
        return;
      }
      case wire::Kind::Goodbye:
        // Everything the peer sent before this has been read: say so, so it
        // can close without a reset destroying frames still in our buffers.
        link.markGoodbye();
        sendControl(link, wire::Kind::GoodbyeAck, {});
        return;
      case wire::Kind::GoodbyeAck:
        link.markGoodbyeAcked();
        linkIdle();
        return;
      case wire::Kind::Heartbeat:
        return;
      default:
        link.fail(fmt::format("unexpected {} frame on an established link", wire::kindName(h.kind)));
        return;
    }
  } catch (const std::exception& e) {
    log::warn(rank(), "malformed {} frame from {}: {}", wire::kindName(h.kind), describeRank(link.peer()), e.what());
    link.fail(fmt::format("malformed {} frame: {}", wire::kindName(h.kind), e.what()));
  }
}

}  // namespace tether
