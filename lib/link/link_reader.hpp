// A link's read side: one read at a time into the per-peer read-ahead (or
// straight into a posted receive's buffer), through the stream's readSome
// (over TCP drainedReadSome, an async_read_some that after draining the
// socket waits for readiness without a failing try: neither an epoll_ctl nor
// a failed recv per message), and a FrameReader (frame_reader.hpp) that turns the
// bytes into frames for the LinkSink. A state machine driven by the read's
// completion (onRead), as Gloo's pair reads: no coroutine, so a frame costs
// no coroutine frame and no awaitable's machinery. A large data frame whose
// receive is not posted yet may be parked: reading stops behind it (the park
// timer) until Link::unpark(). Part of Link (link.hpp); progress thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <optional>
#include <vector>

#include "base/layer.hpp"
#include "link/frame_reader.hpp"
#include "link/sink.hpp"
#include "link/stream.hpp"

TETHER_LAYER(3, "link");

namespace tether::link {

class Link;

class LinkReader final : ReadDone {
 public:
  LinkReader(Link& link, boost::asio::io_context& io, std::uint64_t maxPayload)
      : link_(link), io_(io), frames_(maxPayload), parkTimer_(io) {}
  // Starts the read loop (posted), which runs until the link closes; `self`
  // keeps the link alive meanwhile.
  void start(std::shared_ptr<Link> self);

  bool midFrame() const { return frames_.midFrame() || parked_.has_value(); }
  const wire::FrameHeader* parked() const { return parked_ ? &*parked_ : nullptr; }
  void unpark(bool stash);
  // Drops the owner as the arriving payload's target; 1 when a read into its
  // buffer is running (it ends with onTransferDone(abandoned = true)), else 0.
  int abandon(Owner* owner);
  // The link closed: the owner whose buffer a running read used (it is free
  // now), or null.
  Owner* close() { return std::exchange(draining_, nullptr); }

 private:
  // The loop's steps. The loop's reference to the link (`self`) goes with
  // each wait it starts (the read's handler, the park timer's) and comes
  // back with its end; when the loop ends, it is dropped.
  void onRead(const boost::system::error_code& ec, std::size_t n, std::shared_ptr<void> keep) override;
  void onParkEnd(const boost::system::error_code& ec, std::shared_ptr<Link> self);
  // Hands the frames read so far on, then starts the next read, or parks.
  void pump(std::shared_ptr<Link> self);
  // A data frame's payload: where the sink says (true), or parked until
  // onParkEnd (false: `self` went with the park timer's wait).
  bool placeData(const wire::FrameHeader& h, bool mayWait, std::shared_ptr<Link>& self);
  // Runs a step of the loop (it calls the sink): true if it returned. If it
  // throws, the link fails with why — neither the loop nor the link is left
  // hanging, and nothing escapes into the event loop — and it is false.
  template <class Step>
  bool guarded(Step&& step);
  // The read failed with `ec` (not because the link closed).
  void failed(const boost::system::error_code& ec);

  // The payload of the data frame just read goes where `t` says.
  void place(const Target& t, std::size_t length);
  // The current frame's payload is complete.
  void deliver(const wire::FrameHeader& h);

  Link& link_;
  boost::asio::io_context& io_;
  FrameReader frames_;
  Target target_;                       // the data frame's payload's place
  std::vector<unsigned char> payload_;  // a stashed data frame's payload
  // A control frame's payload: kept for the next one (a credit, a heartbeat),
  // since payload_'s buffer goes to the stash with each stashed frame.
  std::vector<unsigned char> control_;
  Owner* draining_ = nullptr;           // abandoned owner whose buffer a running read uses
  std::optional<wire::FrameHeader> parked_;
  bool unparked_ = false, stashParked_ = false;
  boost::asio::steady_timer parkTimer_;  // the parked read loop waits on it; unpark() cancels it
};

}  // namespace tether::link
