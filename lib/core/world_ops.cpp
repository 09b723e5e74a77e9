// Where operations meet links: sending a frame, posting a receive, failing
// the operations of a lost peer, the data half of link::LinkSink (handed to
// the operation table and the sequence guard) and starting a collective.
#include <fmt/format.h>

#include <algorithm>

#include "base/log.hpp"
#include "core/world.hpp"
#include "wire/notice.hpp"

namespace tether {

// ---- sending and receiving ----

void World::sendFrame(Op& op, int dst, const wire::FrameHeader& h, const void* payload, bool reference) {
  if (op.error) std::rethrow_exception(op.error);
  // A message to ourselves goes through the same matching as one from a peer.
  if (dst == rank()) {
    ops_.deliver(rank(), h, static_cast<const unsigned char*>(payload));
    return;
  }
  auto link = linkFor(dst);
  if (!link) throw peerGoneError(dst, op.name());
  if (op.counters) op.counters->sent(h.length);
  table_.touch(*link);
  log::trace(rank(), "queue {} to rank {}", h, dst);
  link::OutFrame f;
  wire::encodeHeader(h, f.header.data());
  f.len = h.length;
  if (reference && h.length > cfg_.eagerBytes) {
    f.ref = payload;
    f.owner = &op;
    ++op.outstanding;
  } else if (h.length) {
    f.shared = payloads_.copy(static_cast<const unsigned char*>(payload), h.length);
  }
  if (h.kind == wire::Kind::P2P && !window_.admit(dst, h.length)) {
    // Past the window (dst has not received enough of our messages): the
    // frame waits here, not in the stream, so collective and control frames
    // pass it; the send waits with it until dst returns credit.
    if (!f.owner) {
      f.owner = &op;
      ++op.outstanding;
    }
    log::trace(rank(), "hold {} to rank {}: {} bytes not received there", h, dst, window_.unreceived(dst));
    window_.hold(dst, std::move(f));
    return;
  }
  link->enqueue(std::move(f));
}

void World::onCredit(int peer, std::uint64_t bytes) {
  if (life_.closing()) return;  // the sends it held have failed
  auto ready = window_.credit(peer, bytes);
  if (ready.empty()) return;
  auto link = linkFor(peer);
  for (auto& f : ready) {
    if (link) {
      link->enqueue(std::move(f));
      continue;
    }
    Op& op = *static_cast<Op*>(f.owner);
    ops_.failOp(op, std::make_exception_ptr(peerGoneError(peer, op.name())));
  }
}

void World::p2pReceived(int src, std::uint64_t bytes) {
  if (src == rank()) return;
  const std::uint64_t credit = window_.received(src, bytes);
  if (credit > 0 && !life_.closing()) sendControlTo(src, wire::Kind::Credit, wire::encodeCredit(credit));
}

std::string World::windowNote(const Op& op) const {
  const int peer = window_.heldFor(&op);
  if (peer < 0) return "";
  return fmt::format(": it has not yet received {} bytes of this rank's point-to-point messages, the most it may "
                     "hold (TETHER_P2P_WINDOW_BYTES={}, counting each message's payload plus {} bytes)",
                     window_.unreceived(peer), window_.bytes(), SendWindow::kMessageCost);
}

void World::failHeldSends() {
  for (link::Owner* o : window_.ownersHeld()) {
    Op& op = *static_cast<Op*>(o);
    ops_.failOp(op, std::make_exception_ptr(Error(
                        ErrorCode::InvalidArgument,
                        fmt::format("rank {}: {}: the bootstrap was closed while the send waited for its peer to "
                                    "receive earlier messages (TETHER_P2P_WINDOW_BYTES={})",
                                    rank(), op.name(), window_.bytes()),
                        rank())));
  }
}

void World::postRecv(Op& op, const match::Key& key, void* buf, std::size_t len) {
  if (op.error) std::rethrow_exception(op.error);
  const bool self = key.src == static_cast<std::uint32_t>(rank());
  if (ops_.takeStashed(op, key, buf, len)) {
    if (!self && op.counters) op.counters->received(len);  // a frame that came before its receive
    return;
  }
  if (!self && table_.peer(static_cast<int>(key.src)).gone) throw peerGoneError(static_cast<int>(key.src), op.name());
  // A point-to-point receive from a rank we never talked to opens the link now
  // (the sender would open it anyway), so that rank's death shows as a refused
  // dial or EOF -> PeerLost instead of a wait until the deadline.
  if (key.kind == wire::Kind::P2P && !self) linkFor(static_cast<int>(key.src));
  // A collective's sender opens the link; if it has not a moment later, this
  // rank dials (await_watch.hpp).
  else if (!self && !table_.current(static_cast<int>(key.src))) awaitWatch_.note(static_cast<int>(key.src));
  ops_.post(op, key, buf, len);
  // A frame parked on a link from key.src: read it into this receive if it is
  // this receive's, else into the stash (this receive comes behind it).
  if (!self)
    table_.forEachTo(static_cast<int>(key.src), [&](link::Link& l) {
      if (l.parked()) l.unpark(match::keyOf(key.src, *l.parked()) != key);
    });
}

// The op's coroutine returned (e == nullptr) or threw. A coroutine that
// returned has had every frame it posted delivered; a failure recorded after
// its last settle completed (an abort notice read from the same socket right
// behind its last frame, while its resumption was queued) does not undo that.
void World::endOp(Op& op, std::exception_ptr& e) {
  if (op.deadline) op.deadline->cancel();
  sequences_.end(op, e, ops_.mailbox());
  if (e && op.counters) op.counters->failed(e);
  if (e && !op.error) ops_.failOp(op, e);  // withdraw what it still had posted
  if (e) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {  // every error of a call is one
      lastError_ = x.what();
    } catch (...) {
    }
  }
  if (e && op.seq && op.comm == cfg_.worldId) abortAfterFailedCollective(e);
  ops_.remove(op);
}

void World::failOpsOfPeer(int p, bool gone, bool graceful, link::Link& link) {
  std::vector<Op*> affected;
  if (gone)
    for (Op* op : ops_.activeSet()) {
      bool waits = std::any_of(op->posted.begin(), op->posted.end(),
                               [&](const match::Key& k) { return static_cast<int>(k.src) == p; });
      // A collective with p as a member cannot complete on every rank any more,
      // even if this rank is not waiting on p right now (graceful: p finished).
      bool member = !graceful && std::find(op->members.begin(), op->members.end(), p) != op->members.end();
      if (waits || member) affected.push_back(op);
    }
  auto owners = link.ownersWithQueuedFrames();
  if (gone) {  // sends waiting for p's credit cannot go any more
    for (link::Owner* o : window_.ownersHeldFor(p)) owners.push_back(o);
    window_.forget(p);
  }
  for (link::Owner* o : owners) {
    Op* op = static_cast<Op*>(o);
    if (std::find(affected.begin(), affected.end(), op) == affected.end()) affected.push_back(op);
  }
  for (Op* op : affected)
    ops_.failOp(*op, std::make_exception_ptr(gone ? peerGoneError(p, op->name())
                                                  : Error(ErrorCode::PeerLost,
                                                          fmt::format("rank {}: {}: the connection to rank {} broke "
                                                                      "while it was being closed",
                                                                      rank(), op->name(), p),
                                                          rank(), p)));
}

// ---- link::LinkSink: data frames ----

link::Target World::onDataHeader(link::Link& link, const wire::FrameHeader& h, bool mayWait) {
  const int src = link.peer();
  table_.touch(link);
  log::trace(rank(), "frame {} from rank {}", h, src);
  if (auto claim = ops_.claim(src, h)) {
    if (!claim->op) return link::Target{};
    return link::Target{link::Target::Where::Posted, claim->buf, claim->op};
  }
  if (h.kind == wire::Kind::Collective && !sequences_.admit(src, h)) return link::Target{};
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
    case link::Target::Where::Posted:
      if (const auto& c = static_cast<Op*>(t.owner)->counters) c->received(h.length);
      ops_.received(*static_cast<Op*>(t.owner));
      break;
    case link::Target::Where::Stash: {
      // A stashed frame is counted when a receive takes it (postRecv): its
      // communicator may not exist here yet. One that a receive posted
      // meanwhile took at once (nothing stashed) is counted now.
      const std::size_t stashedBefore = ops_.mailbox().stashedCount();
      const bool delivered = ops_.deliver(link.peer(), h, std::move(stashed));
      if (delivered && ops_.mailbox().stashedCount() == stashedBefore)
        if (const CollectiveSeq* seq = sequences_.find(h.comm); seq && seq->counters) seq->counters->received(h.length);
      if (!delivered)
        sequences_.reportProtocol(
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
  if (!sequences_.begin(seq, op)) return;
  // A member that already died (not one that said goodbye) means this
  // collective cannot complete: fail now, naming it, instead of at the deadline.
  // (Only looked for once some peer has died: the scan reads N peers' state
  // on every call, 2% of an all-gather's CPU at 256 ranks.)
  if (table_.diedCount() > 0)
    for (int m : op.members)
      if (m != rank() && table_.peer(m).gone && !table_.peer(m).graceful)
        return ops_.failOp(op, std::make_exception_ptr(peerGoneError(m, op.name())));
  sequences_.checkStashed(op, ops_.mailbox());
}

// ---- TransferView (for the operation table) ----

int World::abandonTransfers(Op& op) {
  window_.drop(&op);  // waiting for credit: nothing in a stream yet
  int held = 0;
  table_.forEach([&](link::Link& l) { held += l.abandon(&op); });
  return held;
}

void World::unparkAll() {
  table_.forEach([](link::Link& l) { l.unpark(true); });
}

int World::queuedFor(const Op& op) const {
  int peer = window_.heldFor(&op);
  if (peer >= 0) return peer;
  table_.forEach([&](const link::Link& l) {
    auto owners = l.ownersWithQueuedFrames();
    if (peer < 0 && std::find(owners.begin(), owners.end(), &op) != owners.end()) peer = l.peer();
  });
  return peer;
}

}  // namespace tether
