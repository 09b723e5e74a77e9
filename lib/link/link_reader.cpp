#include "link/link_reader.hpp"

#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/system_error.hpp>
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

void LinkReader::start(std::shared_ptr<Link> self) {
  asio::post(io_, [this, self = std::move(self)]() mutable { pump(std::move(self)); });
}

template <class Step>
bool LinkReader::guarded(Step&& step) {
  Link& l = link_;
  try {
    step();
    return true;
  } catch (const boost::system::system_error& e) {
    if (l.state_ != Link::State::Closed) failed(e.code());
  } catch (const std::exception& e) {
    if (l.state_ != Link::State::Closed) l.fail(std::string("reading failed: ") + e.what());
  }
  return false;
}

void LinkReader::pump(std::shared_ptr<Link> self) {
  Link& l = link_;
  guarded([&] {
    for (auto s = frames_.step(); s != FrameReader::Step::More; s = frames_.step()) {
      if (s == FrameReader::Step::Bad) {
        log::warn(l.limits_.logRank, "link to rank {} ({}): {}; closing it", l.peer_, l.remote_, frames_.why());
        l.fail("protocol error from peer: " + frames_.why());
        return;
      }
      const wire::FrameHeader h = frames_.header();
      if (s == FrameReader::Step::Payload) {
        deliver(h);
      } else if (!isData(h)) {
        control_.resize(h.length);
        frames_.expect(control_.data());
      } else if (!placeData(h, true, self)) {
        return;  // parked: onParkEnd goes on
      }
      if (l.state_ == Link::State::Closed) return;
    }
    // One read of whatever has arrived: Asio tries it at once and waits for
    // the socket only when nothing has (no re-arm of the descriptor).
    l.stream_->readSome(frames_.readBuffer(), *this, std::move(self));
  });
}

void LinkReader::onRead(const boost::system::error_code& ec, std::size_t n, std::shared_ptr<void> keep) {
  Link& l = link_;
  if (ec) {
    if (l.state_ != Link::State::Closed) failed(ec);
    return;
  }
  frames_.arrived(n);
  if (draining_) {  // abandoned during the read into its buffer: the buffer is free now
    if (!guarded([&] { l.sink_.onTransferDone(*std::exchange(draining_, nullptr), true); })) return;
    if (l.state_ == Link::State::Closed) return;
  }
  pump(std::static_pointer_cast<Link>(std::move(keep)));
}

// A large frame whose receive is not posted yet may be parked (Target::Wait):
// its payload stays in the stream until the receive is posted and is then
// read straight into it, so no rank holds a second copy of a large block. It
// waits at most kParkLimit; then it is read into the stash as any other.
bool LinkReader::placeData(const wire::FrameHeader& h, bool mayWait, std::shared_ptr<Link>& self) {
  Link& l = link_;
  const Target t = l.sink_.onDataHeader(l, h, mayWait);
  if (t.where != Target::Where::Wait) {
    place(t, h.length);
    return true;
  }
  parked_ = h;
  unparked_ = false;
  // The receive is posted by an operation the driver resumes after this
  // handler returns; its unpark() cancels the wait.
  parkTimer_.expires_after(kParkLimit);
  parkTimer_.async_wait(
      [this, self = std::move(self)](const boost::system::error_code& e) mutable { onParkEnd(e, std::move(self)); });
  return false;
}

void LinkReader::onParkEnd(const boost::system::error_code& ec, std::shared_ptr<Link> self) {
  Link& l = link_;
  if (!ec && !unparked_) stashParked_ = true;  // waited long enough: read it into the stash
  const wire::FrameHeader h = *parked_;
  parked_.reset();
  if (l.state_ == Link::State::Closed) return;
  bool placed = false;
  if (!guarded([&] { placed = placeData(h, !std::exchange(stashParked_, false), self); }) || !placed) return;
  if (l.state_ == Link::State::Closed) return;
  pump(std::move(self));
}

void LinkReader::failed(const boost::system::error_code& ec) {
  Link& l = link_;
  if (ec == asio::error::eof)
    l.fail(l.close_.goodbyeRead() ? "closed after goodbye" : "connection closed by peer (EOF)");
  else
    l.fail("read failed: " + ec.message());
}

}  // namespace tether::link
