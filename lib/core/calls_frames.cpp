// Calls (calls.hpp): where operations meet links: sending a frame (through
// the send windows), posting a receive, the data frames the links
// read (handed to the operation table and the sequence guard), failing the
// operations of a lost peer, and the OpTable's view of the transfers.
#include <fmt/format.h>

#include <algorithm>

#include "base/log.hpp"
#include "core/calls.hpp"
#include "wire/notice.hpp"

namespace tether {

// ---- sending and receiving ----

void Calls::sendFrame(Op& op, int dst, const wire::FrameHeader& h, const void* payload, bool reference) {
  if (op.error) std::rethrow_exception(op.error);
  // A message to ourselves goes through the same matching as one from a peer.
  if (dst == rank()) {
    p_.ops.deliver(rank(), h, static_cast<const unsigned char*>(payload));
    return;
  }
  auto link = p_.peers.linkFor(dst);
  if (!link) throw p_.peers.peerGoneError(dst, op);
  if (op.counters) op.counters->sent(h.length);
  p_.table.touch(*link);
  log::trace(rank(), "queue {} to rank {}", h, dst);
  link::OutFrame f;
  wire::encodeHeader(h, f.header.data());
  f.len = h.length;
  // Past its window (dst has not received enough of our point-to-point
  // messages, or of this communicator's collective frames), a frame waits
  // here, not in the stream, so other frames pass it; its call waits with it
  // until dst returns credit.
  const auto [window, lane] = p_.windows.of(dst, h);
  const bool held = window && !window->admit(lane, h.length);
  // A large payload is referenced (the op waits until it is written), and so
  // is a small one the link takes at once (written, or its rest copied, before
  // enqueue returns); a small one that would wait in the queue is copied, so
  // the call need not wait for the frames ahead of it. An empty one is neither.
  if (reference && h.length && (h.length > cfg_.eagerBytes || (!held && link->takesAtOnce(h.length)))) {
    f.ref = payload;
    f.owner = &op;
    ++op.outstanding;
  } else if (h.length) {
    f.shared = p_.payloads.copy(static_cast<const unsigned char*>(payload), h.length);
  }
  if (held) {
    if (!f.owner) {
      f.owner = &op;
      ++op.outstanding;
    }
    log::trace(rank(), "hold {} to rank {}: {} bytes not received there", h, dst, window->unreceived(lane));
    window->hold(lane, std::move(f));
    return;
  }
  link->enqueue(std::move(f));
}

void Calls::onCredit(int peer, wire::Kind data, std::uint64_t comm, std::uint64_t bytes) {
  if (p_.life.closing()) return;  // the sends it held have failed
  // Gathered first: enqueueing a frame may fail the link, which forgets the peer's lanes.
  std::vector<link::OutFrame> ready;
  p_.windows.of(data).credit(Lane(peer, comm), bytes, [&](link::OutFrame&& f) { ready.push_back(std::move(f)); });
  if (ready.empty()) return;
  auto link = p_.peers.linkFor(peer);
  for (auto& f : ready) {
    if (link) {
      link->enqueue(std::move(f));
      continue;
    }
    Op& op = *static_cast<Op*>(f.owner);
    p_.ops.failOp(op, std::make_exception_ptr(p_.peers.peerGoneError(peer, op)));
  }
}

void Calls::frameReceived(int src, const wire::FrameHeader& h) {
  const auto [window, lane] = p_.windows.of(src, h);
  if (!window) return;
  const std::uint64_t credit = window->received(lane, h.length);
  if (credit == 0 || p_.life.closing()) return;
  // Into a reused buffer: no allocation per credit.
  if (h.kind == wire::Kind::P2P) {
    const auto b = wire::encodeCredit(credit);
    p_.peers.sendControlTo(src, wire::Kind::Credit, p_.payloads.copy(b.data(), b.size()));
  } else {
    const auto b = wire::encode(wire::CollectiveCredit{h.comm, credit});
    p_.peers.sendControlTo(src, wire::Kind::CollectiveCredit, p_.payloads.copy(b.data(), b.size()));
  }
}

std::string Calls::windowNote(const Op& op) const { return p_.windows.heldNote(&op); }

void Calls::failHeldSends() {
  for (const SendWindow* w : {&p_.windows.p2p, &p_.windows.coll})
    for (link::Owner* o : w->ownersHeld()) {
      Op& op = *static_cast<Op*>(o);
      const std::string waited =
          w == &p_.windows.p2p
              ? fmt::format("the send waited for its peer to receive earlier messages (TETHER_P2P_WINDOW_BYTES={})",
                            w->bytes())
              : fmt::format(
                    "the collective waited for a peer to receive its earlier frames (at most {} bytes of "
                    "them on one communicator)",
                    w->bytes());
      p_.ops.failOp(
          op, std::make_exception_ptr(Error(
                  ErrorCode::InvalidArgument,
                  fmt::format("{}: {}: the bootstrap was closed while {}", op.who(), op.name(), waited), op.rank())));
    }
}

void Calls::postRecv(Op& op, const match::Key& key, void* buf, std::size_t len) {
  if (op.error) std::rethrow_exception(op.error);
  const bool self = key.src == static_cast<std::uint32_t>(rank());
  if (p_.ops.takeStashed(op, key, buf, len)) {
    if (!self && op.counters) op.counters->received(len);  // a frame that came before its receive
    return;
  }
  if (!self && p_.table.peer(static_cast<int>(key.src)).gone)
    throw p_.peers.peerGoneError(static_cast<int>(key.src), op);
  // A point-to-point receive from a rank we never talked to opens the link now
  // (the sender would open it anyway), so that rank's death shows as a refused
  // dial or EOF -> PeerLost instead of a wait until the deadline.
  if (key.kind == wire::Kind::P2P && !self) p_.peers.linkFor(static_cast<int>(key.src));
  // A collective's sender opens the link; if it has not a moment later, this
  // rank dials (await_watch.hpp).
  else if (!self && !p_.table.current(static_cast<int>(key.src))) p_.awaitWatch.note(static_cast<int>(key.src));
  p_.ops.post(op, key, buf, len);
  // A frame parked on a link from key.src: read it into this receive if it is
  // this receive's, else into the stash (this receive comes behind it).
  if (!self)
    p_.table.forEachTo(static_cast<int>(key.src), [&](link::Link& l) {
      if (l.parked()) l.unpark(match::keyOf(key.src, *l.parked()) != key);
    });
}

void Calls::failOpsOfPeer(int p, bool gone, bool graceful, link::Link& link) {
  std::vector<Op*> affected;
  if (gone)
    for (Op* op : p_.ops.activeSet()) {
      const bool waits = CallTable::postedFrom(*op, p);
      // A collective with p as a member cannot complete on every rank any more,
      // even if this rank is not waiting on p right now (graceful: p finished).
      bool member = !graceful && std::find(op->members.begin(), op->members.end(), p) != op->members.end();
      if (waits || member) affected.push_back(op);
    }
  auto owners = link.ownersWithQueuedFrames();
  if (gone) {  // sends waiting for p's credit cannot go any more
    for (link::Owner* o : p_.windows.ownersHeldFor(p)) owners.push_back(o);
    p_.windows.forget(p);
  }
  for (link::Owner* o : owners) {
    Op* op = static_cast<Op*>(o);
    if (std::find(affected.begin(), affected.end(), op) == affected.end()) affected.push_back(op);
  }
  for (Op* op : affected)
    p_.ops.failOp(*op, std::make_exception_ptr(gone ? p_.peers.peerGoneError(p, *op)
                                                    : Error(ErrorCode::PeerLost,
                                                            fmt::format("{}: {}: the connection to {} broke "
                                                                        "while it was being closed",
                                                                        op->who(), op->name(), op->nameOf(p)),
                                                            op->rank(), op->peerOf(p))));
}

// ---- link::LinkSink: data frames ----

link::Target Calls::onDataHeader(link::Link& link, const wire::FrameHeader& h, bool mayWait) {
  const int src = link.peer();
  p_.table.touch(link);
  log::trace(rank(), "frame {} from rank {}", h, src);
  if (auto claim = p_.ops.claim(src, h)) {
    if (!claim->call) return link::Target{};
    return link::Target{link::Target::Where::Posted, claim->buf, claim->call};
  }
  if (h.kind == wire::Kind::Collective && !p_.sequences.admit(src, h)) return link::Target{};
  // A large block of a collective whose receive is not posted yet stays in
  // the socket until it is (postRecv unparks it): a stashed copy would double
  // this rank's memory for the call. Collective frames only: every member
  // posts its receives when it enters the call, while a point-to-point
  // message may be received after the sender's next one (and a sender must
  // not wait for its receiver to post).
  if (mayWait && h.kind == wire::Kind::Collective && h.length > cfg_.eagerBytes && !p_.abort.aborted())
    return link::Target{link::Target::Where::Wait, nullptr, nullptr};
  return link::Target{link::Target::Where::Stash, nullptr, nullptr};
}

void Calls::onDataComplete(link::Link& link, const wire::FrameHeader& h, const link::Target& t,
                           std::vector<unsigned char>&& stashed) {
  switch (t.where) {
    case link::Target::Where::Posted:
      if (const auto& c = static_cast<Op*>(t.owner)->counters) c->received(h.length);
      p_.ops.received(*static_cast<Op*>(t.owner));
      break;
    case link::Target::Where::Stash: {
      // A stashed frame is counted when a receive takes it (postRecv): its
      // communicator may not exist here yet. One that a receive posted
      // meanwhile took at once (nothing stashed) is counted now.
      const std::size_t stashedBefore = p_.ops.mailbox().stashedCount();
      const bool delivered = p_.ops.deliver(link.peer(), h, std::move(stashed));
      if (delivered && p_.ops.mailbox().stashedCount() == stashedBefore)
        if (const CollectiveSeq* seq = p_.sequences.find(h.comm); seq && seq->counters) seq->counters->received(h.length);
      if (!delivered) {
        const CollectiveSeq* seq = p_.sequences.find(h.comm);
        const detail::core::RankNames& names = seq ? seq->names : worldNames_;
        p_.sequences.reportProtocol(h.comm, Error(ErrorCode::Protocol,
                                                  fmt::format("{}: {} sent {} twice", names.who(),
                                                              names.nameOfWorld(link.peer()), wire::describe(h)),
                                                  names.rank(), names.rankOf(link.peer())));
      }
      break;
    }
    case link::Target::Where::Discard:
    case link::Target::Where::Wait:  // never completes: the link asks again after unpark()
      break;
  }
}

// ---- TransferView (for the operation table) ----

int Calls::abandonTransfers(Op& op) {
  p_.windows.drop(&op);  // waiting for credit: nothing in a stream yet
  int held = 0;
  p_.table.forEach([&](link::Link& l) { held += l.abandon(&op); });
  return held;
}

void Calls::unparkAll() {
  p_.table.forEach([](link::Link& l) { l.unpark(true); });
}

int Calls::queuedFor(const Op& op) const {
  int peer = p_.windows.heldPeer(&op);
  if (peer >= 0) return peer;
  p_.table.forEach([&](const link::Link& l) {
    auto owners = l.ownersWithQueuedFrames();
    if (peer < 0 && std::find(owners.begin(), owners.end(), &op) != owners.end()) peer = l.peer();
  });
  return peer;
}

}  // namespace tether
