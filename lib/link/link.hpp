// One long-lived, ordered byte stream to one peer (a Stream, stream.hpp: TCP
// or in memory). A single outstanding write
// drains a queue of frames (gathered into one writev); a read loop parses
// frames from a read-ahead buffer and lands payloads straight in the posted
// receive's buffer when there is one. The lingering close is the link's own
// protocol (docs/ordering.md, "Closing and reopening a link", R1-R2): a
// Goodbye (final or idle) is the last frame a side writes except the
// GoodbyeAck; the side that sent a Goodbye closes once it has read the ack,
// the side that read one once its ack is written, so no stream is ever closed
// with unread data. Talks to its owner only through a LinkSink (sink.hpp).
// Progress thread only.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/layer.hpp"
#include "link/sink.hpp"
#include "link/stream.hpp"
#include "wire/frame.hpp"
#include "wire/handshake.hpp"

TETHER_LAYER(3, "link");

namespace tether::link {

namespace asio = boost::asio;

struct OutFrame {
  wire::HeaderBytes header{};
  std::vector<unsigned char> owned;  // copied payload, or
  wire::SharedBytes shared;          // a payload shared with other frames (a table sent to many), or
  const void* ref = nullptr;         // the caller's payload (owner waits until written)
  std::size_t len = 0;
  Owner* owner = nullptr;  // set only for referenced payloads
  bool abandoned = false;  // owner failed while this frame was being written
  bool ack = false;        // the GoodbyeAck: written means this side may close
};

// A control frame of `kind` with a copied payload, or a shared one.
OutFrame controlFrame(wire::Kind kind, const std::vector<unsigned char>& payload);
OutFrame controlFrame(wire::Kind kind, wire::SharedBytes payload);

struct LinkLimits {
  std::uint64_t maxPayload = 1ULL << 30;  // larger frames are a protocol error
  int logRank = -1;                       // this rank, for log lines
};

class Link : public std::enable_shared_from_this<Link> {
 public:
  // Closing: a Goodbye was sent or read; the link only drains and lingers.
  enum class State { Dialing, Up, Closing, Closed };

  // `epoch`: connections to `peer` set aside before this one (R5).
  Link(asio::io_context& io, LinkSink& sink, int peer, std::uint32_t epoch, LinkLimits limits);
  int peer() const { return peer_; }
  std::uint32_t epoch() const { return epoch_; }
  State state() const { return state_; }
  const std::string& remote() const { return remote_; }
  // Nothing queued or being written.
  bool idle() const { return queue_.empty() && inFlight_ == 0; }
  // A frame's payload is being read right now, or waits in the stream (parked).
  bool midFrame() const { return pendingDst_ != nullptr || directRead_ || parked_.has_value(); }
  // The data frame whose payload waits in the stream for its receive (the
  // owner answered Wait); reading stopped behind it. Null when none.
  const wire::FrameHeader* parked() const { return parked_ ? &*parked_ : nullptr; }
  // Resumes reading: the owner is asked for the parked frame's target again;
  // with `stash` it may not answer Wait (later frames are needed). A goodbye
  // or a failure unparks with `stash` too.
  void unpark(bool stash);
  // Use counter for least-recently-used choices (set by the owner).
  std::uint64_t lastUsed = 0;

  // Dialing -> Up (or Closing, if a goodbye is already queued): starts the
  // read loop and flushes frames queued meanwhile.
  void attach(std::shared_ptr<Stream> stream, bool dialedByUs);
  bool dialedByUs() const { return dialedByUs_; }
  // Queues a frame. Not after a goodbye was sent or read (R1).
  void enqueue(OutFrame frame);
  // Queues a Goodbye behind everything queued; nothing may follow it. An Up
  // link becomes Closing at once; a Dialing one when it attaches.
  void sendGoodbye(wire::GoodbyeMode mode);
  bool goodbyeSent() const { return goodbyeSent_; }
  // Our goodbye has been acknowledged (everything we wrote was read).
  bool ackRead() const { return ackRead_; }
  // Closed by the goodbye exchange (R2), not by an error.
  bool closedAfterGoodbye() const { return clean_; }
  // A goodbye of the idle kind was sent or read: the peer may be dialled again.
  bool idleClose() const {
    return (goodbyeSent_ && sentMode_ == wire::GoodbyeMode::Idle) ||
           (goodbyeRead_ && readMode_ == wire::GoodbyeMode::Idle);
  }
  // Drops the owner's queued frames and its receive target. A frame already
  // being written from (or read into) the owner's buffer is finished first:
  // returns how many such transfers are still running; each ends with
  // onTransferDone(owner, abandoned = true).
  int abandon(Owner* owner);
  // Closes the link and reports it down to the sink once.
  void fail(const std::string& reason);
  // Owners with referenced frames still queued (they cannot complete any more).
  std::vector<Owner*> ownersWithQueuedFrames() const;

 private:
  asio::awaitable<void> readLoop();
  asio::awaitable<void> fill(std::size_t n);
  asio::awaitable<void> readPayload(std::size_t len);
  asio::awaitable<void> readDataFrame(const wire::FrameHeader& h);
  void onGoodbyeFrame(const std::vector<unsigned char>& payload);
  bool writing() const;
  void closeIfDone();
  void startWrite();
  // The part of a gathered write that did not fit at once; `self` keeps the link alive.
  asio::awaitable<void> writeRest(std::shared_ptr<Link> self, std::vector<asio::const_buffer> rest);
  void finishWrite();
  // A write failed (the peer closed or reset): see link.cpp.
  void writeBroken(const std::string& reason);

  asio::io_context& io_;
  LinkSink& sink_;
  const int peer_;
  const std::uint32_t epoch_;
  const LinkLimits limits_;
  State state_ = State::Dialing;
  std::string remote_;
  std::shared_ptr<Stream> stream_;
  bool dialedByUs_ = false;

  // The lingering close.
  bool goodbyeSent_ = false, goodbyeRead_ = false, ackRead_ = false, ackWritten_ = false, clean_ = false;
  wire::GoodbyeMode sentMode_ = wire::GoodbyeMode::Final, readMode_ = wire::GoodbyeMode::Final;

  // Writing.
  std::deque<OutFrame> queue_;
  std::size_t inFlight_ = 0;  // frames at the front of queue_ being written now
  bool writeBroken_ = false;  // a write failed; the read side ends the link (or brokenTimer_ does)
  asio::steady_timer brokenTimer_;

  // Reading.
  std::vector<unsigned char> rbuf_;
  std::size_t rbegin_ = 0, rend_ = 0;
  const Owner* pendingOwner_ = nullptr;  // owner whose payload is arriving now
  unsigned char* pendingDst_ = nullptr;  // where it goes (nullptr: discard)
  bool directRead_ = false;              // the stream is reading into pendingDst_
  bool mayHaveData_ = true;              // the last read did not empty the stream
  Owner* drainingRead_ = nullptr;        // abandoned owner whose direct read is still running
  std::optional<wire::FrameHeader> parked_;
  bool unparked_ = false, stashParked_ = false;
  asio::steady_timer parkTimer_;  // the parked read loop waits on it; unpark() cancels it
};

}  // namespace tether::link
