// The link's lingering close (docs/ordering.md, "Closing and reopening a
// link", R1-R2): the goodbye -> acknowledgement machine. A Goodbye (final or
// idle) is the last frame a side writes except the GoodbyeAck; the side that
// sent a Goodbye closes once it has read the ack, the side that read one once
// its ack is written, so no stream is ever closed with unread data. It decides;
// the Link queues, reads and closes. Progress thread only.
#pragma once

#include <vector>

#include "base/layer.hpp"
#include "wire/handshake.hpp"

TETHER_LAYER(3, "link");

namespace tether::link {

class LingeringClose {
 public:
  // R1: after a goodbye was sent or read only the ack may be queued.
  bool mayQueue(bool ack) const { return ack || !(sent_ || read_); }
  void sent(wire::GoodbyeMode mode) {
    sent_ = true;
    sentMode_ = mode;
  }
  // The peer's goodbye; throws std::invalid_argument on a malformed one.
  wire::GoodbyeMode read(const std::vector<unsigned char>& payload) {
    readMode_ = wire::decodeGoodbye(payload);
    read_ = true;
    return readMode_;
  }
  void ackRead() { ackRead_ = true; }
  void ackWritten() { ackWritten_ = true; }
  // R2: everything this side wrote was read, and everything the peer wrote
  // before its goodbye was read here and acknowledged.
  bool mayClose() const { return !(sent_ && !ackRead_) && !(read_ && !ackWritten_); }

  bool goodbyeSent() const { return sent_; }
  bool goodbyeRead() const { return read_; }
  bool ackWasRead() const { return ackRead_; }
  bool idle() const {
    return (sent_ && sentMode_ == wire::GoodbyeMode::Idle) || (read_ && readMode_ == wire::GoodbyeMode::Idle);
  }

 private:
  bool sent_ = false, read_ = false, ackRead_ = false, ackWritten_ = false;
  wire::GoodbyeMode sentMode_ = wire::GoodbyeMode::Final, readMode_ = wire::GoodbyeMode::Final;
};

}  // namespace tether::link
