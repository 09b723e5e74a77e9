// One long-lived, ordered byte stream to one peer (a Stream, stream.hpp: TCP
// or in memory), made of three units with one job each: the writer
// (link_writer.hpp: the queue and its gathered writes), the reader
// (link_reader.hpp: one read at a time into a per-peer buffer, a frame reader
// that lands payloads straight in the posted receive's buffer when there is
// one, parking) and the lingering close (lingering_close.hpp: goodbye ->
// acknowledgement, docs/ordering.md R1-R2). The Link holds the named state and
// the stream, and talks to its owner only through a LinkSink (sink.hpp).
// Progress thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/layer.hpp"
#include "link/lingering_close.hpp"
#include "link/link_reader.hpp"
#include "link/link_writer.hpp"
#include "link/out_frame.hpp"
#include "link/sink.hpp"
#include "link/stream.hpp"
#include "wire/frame.hpp"
#include "wire/handshake.hpp"

TETHER_LAYER(3, "link");

namespace tether::link {

namespace asio = boost::asio;

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
  bool idle() const { return writer_.idle(); }
  // A frame is being read right now (its header is, its payload is not all
  // in place), or its payload waits in the stream (parked).
  bool midFrame() const { return reader_.midFrame(); }
  // The data frame whose payload waits in the stream for its receive (the
  // owner answered Wait); reading stopped behind it. Null when none.
  const wire::FrameHeader* parked() const { return reader_.parked(); }
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
  // A frame of `len` payload bytes enqueued now is off the caller's buffer
  // when enqueue returns (written, or its unwritten rest copied): its payload
  // may be referenced instead of copied (Calls::sendFrame).
  bool takesAtOnce(std::size_t len) const { return writing() && writer_.takesAtOnce(len); }
  // Queues a Goodbye behind everything queued; nothing may follow it. An Up
  // link becomes Closing at once; a Dialing one when it attaches.
  void sendGoodbye(wire::GoodbyeMode mode);
  bool goodbyeSent() const { return close_.goodbyeSent(); }
  // Our goodbye has been acknowledged (everything we wrote was read).
  bool ackRead() const { return close_.ackWasRead(); }
  // Closed by the goodbye exchange (R2), not by an error.
  bool closedAfterGoodbye() const { return clean_; }
  // A goodbye of the idle kind was sent or read: the peer may be dialled again.
  bool idleClose() const { return close_.idle(); }
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
  friend class LinkReader;
  friend class LinkWriter;
  void onGoodbyeFrame(const std::vector<unsigned char>& payload);
  bool writing() const { return state_ == State::Up || state_ == State::Closing; }
  // R2: closes once the lingering close allows it.
  void closeIfDone();

  asio::io_context& io_;
  LinkSink& sink_;
  const int peer_;
  const std::uint32_t epoch_;
  const LinkLimits limits_;
  State state_ = State::Dialing;
  std::string remote_;
  std::shared_ptr<Stream> stream_;
  bool dialedByUs_ = false;
  bool clean_ = false;  // closed by the goodbye exchange
  LingeringClose close_;
  LinkWriter writer_;
  LinkReader reader_;
};

}  // namespace tether::link
