// A link's write side: the queue of frames and its one outstanding gathered
// write. Frames are written straight from where their payload is (the
// caller's buffer, a shared table, a copy) in one sendmsg of up to 64 frames,
// tried in the handler that queued them; what the kernel did not take is
// copied (up to 64 KiB, so the owners are done at once) and written when the
// stream drains, or, when larger, written from the owners' buffers while they
// wait. Part of Link (link.hpp); progress thread only.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <array>
#include <memory>
#include <string>
#include <vector>

#include "base/layer.hpp"
#include "link/frame_queue.hpp"
#include "link/out_frame.hpp"

TETHER_LAYER(3, "link");

namespace tether::link {

class Link;

class LinkWriter {
 public:
  // The most of a partial write that is copied rather than written later from
  // the owners' buffers: a few frames of any size, or one frame of the default
  // eager size (64 KiB) with its header, not a large block twice.
  static constexpr std::size_t kCopyLimit = 64 * 1024 + wire::kHeaderBytes;
  static constexpr std::size_t kMaxGather = 64;  // frames per sendmsg

  LinkWriter(Link& link, boost::asio::io_context& io) : link_(link), brokenTimer_(io) {}
  void push(OutFrame frame) { queue_.push_back(std::move(frame)); }
  // Writes what is queued unless a write is outstanding; tells the sink when idle.
  void start();
  // A write is outstanding.
  bool busy() const { return inFlight_ != 0 || !tail_.empty(); }
  bool idle() const { return queue_.empty() && !busy(); }
  // A frame of `len` payload bytes pushed now is written by start(), or what
  // the kernel does not take of it copied, before start() returns: nothing is
  // queued or being written, no write failed, and the frame fits kCopyLimit.
  bool takesAtOnce(std::size_t len) const { return idle() && !broken_ && wire::kHeaderBytes + len <= kCopyLimit; }
  // Drops the owner's queued frames; returns how many of its frames are being
  // written from its buffer (each ends with onTransferDone(abandoned = true)).
  int abandon(Owner* owner);
  std::vector<Owner*> queuedOwners() const;
  // A write failed (the peer closed or reset): see link_writer.cpp.
  void broken(const std::string& reason);
  // The link closed: drops the queue. Returns the owners of abandoned frames
  // that were being written (their buffers are free now).
  std::vector<Owner*> close();

 private:
  // The rest of a gathered write; `self` keeps the link alive.
  boost::asio::awaitable<void> writeRest(std::shared_ptr<Link> self, std::vector<boost::asio::const_buffer> rest);
  // The inFlight_ frames are written (or copied: `ackOnWire` false while the ack's bytes wait in tail_).
  void finish(bool ackOnWire);

  Link& link_;
  FrameQueue queue_;
  std::size_t inFlight_ = 0;          // frames at the front of queue_ being written now
  std::array<wire::HeaderBytes, kMaxGather> headers_{};  // their headers, where the write reads them
  // The write's buffers (a header and a payload per frame): kept, not a local
  // array, whose construction zeroed all 128 entries (2 KiB) every write.
  std::array<boost::asio::const_buffer, 2 * kMaxGather> bufs_;
  std::vector<unsigned char> tail_;   // the copied rest of a partial write, being written
  bool tailHasAck_ = false;           // the GoodbyeAck ends tail_
  bool broken_ = false;               // a write failed; the read side ends the link (or brokenTimer_ does)
  boost::asio::steady_timer brokenTimer_;
};

}  // namespace tether::link
