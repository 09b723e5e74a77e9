#include "link/link_reader.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <stdexcept>
#include <string>
#include <utility>

#include "base/log.hpp"
#include "link/link.hpp"

namespace tether::link {
namespace {
// How long a large frame may wait in the stream for its receive before it is
// read into the stash after all. Bounded because while it waits nothing behind
// it on this stream is read (an abort notice, a status query, a goodbye), and
// because Linux ends a connection whose zero window outlasts TCP_USER_TIMEOUT
// (16 s by default): the sender would see a healthy peer as lost.
constexpr auto kParkLimit = std::chrono::milliseconds(250);

bool isData(const wire::FrameHeader& h) { return h.kind == wire::Kind::P2P || h.kind == wire::Kind::Collective; }
}  // namespace

void LinkReader::unpark(bool stash) {
  if (!parked_) return;
  stashParked_ = stashParked_ || stash;
  unparked_ = true;
  parkTimer_.cancel();
}

int LinkReader::abandon(Owner* owner) {
  if (!owner || target_.owner != owner) return 0;
  target_ = Target{};
  frames_.redirect(nullptr);  // the rest of the payload is dropped
  // A read into the owner's buffer cannot be cut short; it ends soon (the
  // peer is sending it), so hold the owner until then.
  if (frames_.readingDirect() && !draining_) {
    draining_ = owner;
    return 1;
  }
  return 0;
}

void LinkReader::place(const Target& t, std::size_t length) {
  target_ = t;
  payload_.clear();
  if (t.where == Target::Where::Stash) payload_ = link_.sink_.stashBuffer(length);
  frames_.expect(t.where == Target::Where::Posted  ? static_cast<unsigned char*>(t.buf)
                 : t.where == Target::Where::Stash ? payload_.data()
                                                   : nullptr);
}

void LinkReader::deliver(const wire::FrameHeader& h) {
  Link& l = link_;
  if (isData(h)) {
    const Target t = std::exchange(target_, Target{});
    l.sink_.onDataComplete(l, h, t, std::move(payload_));
    payload_.clear();
    return;
  }
  if (h.kind == wire::Kind::Goodbye) {
    try {
      l.onGoodbyeFrame(control_);
    } catch (const std::invalid_argument& e) {
      l.fail(std::string("malformed goodbye: ") + e.what());
    }
  } else if (h.kind == wire::Kind::GoodbyeAck) {
    l.close_.ackRead();
    l.closeIfDone();
  } else {
    l.sink_.onControlFrame(l, h, std::move(control_));  // moved out only by the rendezvous' frames
  }
  control_.clear();
}

asio::awaitable<void> LinkReader::run(std::shared_ptr<Link>) {
  Link& l = link_;
  try {
    for (;;) {
      for (auto s = frames_.step(); s != FrameReader::Step::More; s = frames_.step()) {
        if (s == FrameReader::Step::Bad) {
          log::warn(l.limits_.logRank, "link to rank {} ({}): {}; closing it", l.peer_, l.remote_, frames_.why());
          l.fail("protocol error from peer: " + frames_.why());
          co_return;
        }
        const wire::FrameHeader h = frames_.header();
        if (s == FrameReader::Step::Payload) {
          deliver(h);
        } else if (!isData(h)) {
          control_.resize(h.length);
          frames_.expect(control_.data());
        } else {
          Target t = l.sink_.onDataHeader(l, h, true);
          // A large frame whose receive is not posted yet may be parked
          // (Target::Wait): its payload stays in the stream until the receive
          // is posted and is then read straight into it, so no rank holds a
          // second copy of a large block. It waits at most kParkLimit; then it
          // is read into the stash as any other.
          while (t.where == Target::Where::Wait) {
            parked_ = h;
            unparked_ = false;
            // The receive is posted by an operation the driver resumes after
            // this handler returns; its unpark() cancels the wait.
            parkTimer_.expires_after(kParkLimit);
            auto [ec] = co_await parkTimer_.async_wait(asio::as_tuple(asio::use_awaitable));
            if (!ec && !unparked_) stashParked_ = true;  // waited long enough: read it into the stash
            parked_.reset();
            if (l.state_ == Link::State::Closed) co_return;
            t = l.sink_.onDataHeader(l, h, !std::exchange(stashParked_, false));
          }
          place(t, h.length);
        }
        if (l.state_ == Link::State::Closed) co_return;
      }
      // One read of whatever has arrived: Asio tries it at once and waits for
      // the socket only when nothing has (no re-arm of the descriptor).
      const std::size_t got = co_await l.stream_->readSome(frames_.readBuffer());
      frames_.arrived(got);
      if (draining_) {  // abandoned during the read into its buffer: the buffer is free now
        l.sink_.onTransferDone(*std::exchange(draining_, nullptr), true);
        if (l.state_ == Link::State::Closed) co_return;
      }
    }
  } catch (const boost::system::system_error& e) {
    if (l.state_ == Link::State::Closed) co_return;
    if (e.code() == asio::error::eof)
      l.fail(l.close_.goodbyeRead() ? "closed after goodbye" : "connection closed by peer (EOF)");
    else
      l.fail("read failed: " + e.code().message());
  }
}

}  // namespace tether::link
