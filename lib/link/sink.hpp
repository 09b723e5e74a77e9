// The link seam: what a Link tells its owner, and the owner's opaque handle
// for a transfer. A Link knows only the wire format and this interface; the
// world (lib/core) implements it. Progress thread only.
#pragma once

#include <string>
#include <vector>

#include "base/layer.hpp"
#include "wire/frame.hpp"
#include "wire/handshake.hpp"

TETHER_LAYER(3, "link");

namespace tether::link {

class Link;

// Whatever a frame's payload belongs to (an operation in lib/core). A Link
// only compares and reports these pointers.
class Owner {
 protected:
  ~Owner() = default;
};

// Where an arriving data frame's payload goes. Wait: nowhere yet — the link
// stops reading (the payload stays in the socket) until Link::unpark().
struct Target {
  enum class Where { Posted, Stash, Discard, Wait } where = Where::Discard;
  void* buf = nullptr;     // Posted: the receive's buffer
  Owner* owner = nullptr;  // Posted: the operation that posted it
};

class LinkSink {
 public:
  // A data frame's header arrived; its payload follows. Wait is allowed only
  // with `mayWait`; after unpark() the link asks again.
  virtual Target onDataHeader(Link& link, const wire::FrameHeader& h, bool mayWait) = 0;
  // A buffer of `length` bytes for the payload of a frame headed for the
  // stash (Target::Stash); it comes back in onDataComplete's `stashed`. The
  // owner may hand out a buffer it kept from an earlier stashed payload.
  virtual std::vector<unsigned char> stashBuffer(std::size_t length) { return std::vector<unsigned char>(length); }
  // The payload is in place (Posted), in `stashed` (Stash), or was dropped.
  virtual void onDataComplete(Link& link, const wire::FrameHeader& h, const Target& t,
                              std::vector<unsigned char>&& stashed) = 0;
  virtual void onControlFrame(Link& link, const wire::FrameHeader& h, std::vector<unsigned char>&& payload) = 0;
  // The peer's Goodbye was read (final: it leaves; idle: it closes this
  // connection only). The link is Closing from now on: nothing but the ack
  // is written on it (R1); the owner sends later frames on a new link.
  virtual void onGoodbye(Link& link, wire::GoodbyeMode mode) = 0;
  // The link closed (once): after the goodbye exchange (graceful), or on an
  // error. `graceful`: the peer said goodbye first.
  virtual void onLinkDown(Link& link, const std::string& reason, bool graceful) = 0;
  // A referenced payload of `owner` is written (or its rest copied), or — `abandoned`
  // — a transfer the owner gave up on has ended and no longer uses its buffer.
  virtual void onTransferDone(Owner& owner, bool abandoned) = 0;
  // Nothing is queued or being written any more.
  virtual void onLinkIdle(Link& link) = 0;

 protected:
  ~LinkSink() = default;
};

}  // namespace tether::link
