#include "link/link.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <algorithm>
#include <array>
#include <cstring>
#include <span>
#include <stdexcept>
#include <utility>

#include "base/log.hpp"

namespace tether::link {
namespace {
constexpr std::size_t kReadAhead = 64 * 1024;
// A link starts with a small read-ahead (1 KiB) and doubles it (up to kReadAhead)
// when a read fills it: a rank with a thousand mostly idle links (the root
// during the rendezvous) must not hold 64 KiB for each.
constexpr std::size_t kReadAheadStart = 1024;
// How long a large frame may wait in the stream for its receive before it is
// read into the stash after all. Bounded because while it waits nothing behind
// it on this stream is read (an abort notice, a status query, a goodbye), and
// because Linux ends a connection whose zero window outlasts TCP_USER_TIMEOUT
// (16 s by default): the sender would see a healthy peer as lost.
constexpr auto kParkLimit = std::chrono::milliseconds(250);
constexpr auto kBrokenGrace = std::chrono::milliseconds(200);  // Link::writeBroken
constexpr std::size_t kMaxGather = 64;  // frames per writev
}  // namespace

OutFrame controlFrame(wire::Kind kind, const std::vector<unsigned char>& payload) {
  OutFrame f;
  wire::FrameHeader h;
  h.kind = kind;
  h.length = payload.size();
  wire::encodeHeader(h, f.header.data());
  f.owned = payload;
  f.len = payload.size();
  return f;
}

OutFrame controlFrame(wire::Kind kind, wire::SharedBytes payload) {
  OutFrame f;
  wire::FrameHeader h;
  h.kind = kind;
  h.length = payload ? payload->size() : 0;
  wire::encodeHeader(h, f.header.data());
  f.len = h.length;
  f.shared = std::move(payload);
  return f;
}

Link::Link(asio::io_context& io, LinkSink& sink, int peer, std::uint32_t epoch, LinkLimits limits)
    : io_(io), sink_(sink), peer_(peer), epoch_(epoch), limits_(limits), brokenTimer_(io), rbuf_(kReadAheadStart), parkTimer_(io) {}

void Link::attach(std::shared_ptr<Stream> stream, bool dialedByUs) {
  if (state_ != State::Dialing) return;
  dialedByUs_ = dialedByUs;
  remote_ = stream->peer();
  // Reads and writes are tried directly first (see fill() and startWrite());
  // they report would_block instead of waiting.
  stream_ = std::move(stream);
  state_ = goodbyeSent_ ? State::Closing : State::Up;
  asio::co_spawn(io_, readLoop(), asio::detached);
  startWrite();
}

bool Link::writing() const { return state_ == State::Up || state_ == State::Closing; }

void Link::enqueue(OutFrame frame) {
  // R1: after a goodbye only the ack may follow; the owner sends later
  // frames on a new link.
  if ((goodbyeSent_ || goodbyeRead_) && !frame.ack)
    throw std::logic_error("a frame queued on a link after its goodbye");
  if (state_ == State::Closed) return;
  queue_.push_back(std::move(frame));
  if (writing() && inFlight_ == 0) startWrite();
}

void Link::sendGoodbye(wire::GoodbyeMode mode) {
  if (goodbyeSent_ || state_ == State::Closed) return;
  unpark(true);  // the ack comes behind the parked frame
  enqueue(controlFrame(wire::Kind::Goodbye, wire::encodeGoodbye(mode)));
  goodbyeSent_ = true;
  sentMode_ = mode;
  if (state_ == State::Up) state_ = State::Closing;
}

void Link::onGoodbyeFrame(const std::vector<unsigned char>& payload) {
  readMode_ = wire::decodeGoodbye(payload);  // throws on a malformed one
  goodbyeRead_ = true;
  if (state_ == State::Up) state_ = State::Closing;
  sink_.onGoodbye(*this, readMode_);
  // Everything the peer sent before its goodbye has been read: say so.
  OutFrame ack = controlFrame(wire::Kind::GoodbyeAck, std::vector<unsigned char>{});
  ack.ack = true;
  enqueue(std::move(ack));
}

// R2: the side that sent a goodbye closes once it has read the ack; the side
// that read one, once its ack is written. Nothing unread is left behind.
void Link::closeIfDone() {
  if (state_ != State::Closing || (goodbyeSent_ && !ackRead_) || (goodbyeRead_ && !ackWritten_)) return;
  state_ = State::Closed;
  clean_ = true;
  stream_->close();
  sink_.onLinkDown(*this, "closed after goodbye", true);
}

void Link::startWrite() {
  while (writing() && !writeBroken_ && inFlight_ == 0 && !queue_.empty()) {
    std::array<asio::const_buffer, 2 * kMaxGather> bufs;
    std::size_t n = std::min(queue_.size(), kMaxGather), nbufs = 0, total = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const auto& f = queue_[i];
      bufs[nbufs++] = asio::const_buffer(f.header.data(), f.header.size());
      if (f.len)
        bufs[nbufs++] = asio::const_buffer(f.ref ? f.ref : f.shared ? f.shared->data() : f.owned.data(), f.len);
      total += f.header.size() + f.len;
    }
    inFlight_ = n;
    auto seq = std::span(bufs.data(), nbufs);
    // Small frames nearly always fit the socket buffer: write them now, in
    // this handler, instead of a write operation that completes through the
    // scheduler a round later.
    boost::system::error_code ec;
    std::size_t written = stream_->writeSomeNow(seq, ec);
    if (ec == asio::error::would_block) {
      ec.clear();
      written = 0;
    }
    if (ec) return writeBroken("write failed: " + ec.message());
    if (written == total) {
      finishWrite();
      continue;
    }
    // The rest waits for the stream to drain; the queue keeps the frames alive.
    std::vector<asio::const_buffer> rest;
    std::size_t skip = written;
    for (const auto& b : seq) {
      if (skip >= b.size()) {
        skip -= b.size();
        continue;
      }
      rest.push_back(b + skip);
      skip = 0;
    }
    asio::co_spawn(io_, writeRest(shared_from_this(), std::move(rest)), asio::detached);
    return;
  }
  if (idle() && writing()) sink_.onLinkIdle(*this);
}

// The first parameter keeps the link alive until the write ends.
asio::awaitable<void> Link::writeRest(std::shared_ptr<Link>, std::vector<asio::const_buffer> rest) {
  std::string failure;
  try {
    co_await stream_->write(std::move(rest));
  } catch (const boost::system::system_error& e) {
    failure = "write failed: " + e.code().message();
  }
  if (state_ == State::Closed) co_return;
  if (!failure.empty()) {
    writeBroken(failure);
    co_return;
  }
  finishWrite();
  startWrite();
}

// The inFlight_ frames at the front of the queue are on the wire.
void Link::finishWrite() {
  // Take them off the queue before telling their owners: a woken owner may
  // queue more frames or fail (and prune the queue) right away.
  std::vector<std::pair<Owner*, bool>> done;
  for (std::size_t i = 0; i < inFlight_; ++i) {
    if (queue_.front().owner) done.emplace_back(queue_.front().owner, queue_.front().abandoned);
    if (queue_.front().ack) ackWritten_ = true;
    queue_.pop_front();
  }
  inFlight_ = 0;
  for (auto [owner, abandoned] : done) sink_.onTransferDone(*owner, abandoned);
  closeIfDone();
}

std::vector<Owner*> Link::ownersWithQueuedFrames() const {
  std::vector<Owner*> owners;
  for (const auto& f : queue_)
    if (f.owner) owners.push_back(f.owner);
  return owners;
}

int Link::abandon(Owner* owner) {
  if (state_ == State::Closed) return 0;  // fail() released what was left
  // Cutting a half-written or half-read frame would close a healthy link and
  // make the peer report this rank as lost; the transfer ends soon (the peer
  // is reading / sending it), so let it finish and hold the owner until then.
  int held = 0;
  for (std::size_t i = 0; i < inFlight_; ++i)
    if (queue_[i].owner == owner && !queue_[i].abandoned) {
      queue_[i].abandoned = true;
      ++held;
    }
  queue_.erase(std::remove_if(queue_.begin() + static_cast<std::ptrdiff_t>(inFlight_), queue_.end(),
                              [&](const OutFrame& f) { return f.owner == owner; }),
               queue_.end());
  if (pendingOwner_ == owner) {
    if (directRead_ && !drainingRead_) {
      drainingRead_ = owner;
      return held + 1;
    }
    pendingOwner_ = nullptr;
    pendingDst_ = nullptr;
  }
  return held;
}

void Link::unpark(bool stash) {
  if (!parked_) return;
  stashParked_ = stashParked_ || stash;
  unparked_ = true;
  parkTimer_.cancel();
}

// The peer closed or reset the connection. What it sent before — an abort
// notice naming who aborted, its goodbye — may still wait in our receive
// buffer and says more than the broken write: the read loop reads it and then
// ends the link itself (EOF or reset). Only if it does not within
// kBrokenGrace does the write's failure end it.
void Link::writeBroken(const std::string& reason) {
  if (state_ == State::Closed || writeBroken_) return;
  writeBroken_ = true;
  unpark(true);
  brokenTimer_.expires_after(kBrokenGrace);
  brokenTimer_.async_wait([self = shared_from_this(), reason](boost::system::error_code ec) {
    if (!ec) self->fail(reason);
  });
}

void Link::fail(const std::string& reason) {
  if (state_ == State::Closed) return;
  state_ = State::Closed;
  brokenTimer_.cancel();
  unpark(true);
  // The owner may drop its last reference to this link in onLinkDown.
  auto self = weak_from_this().lock();
  if (stream_) stream_->close();
  sink_.onLinkDown(*this, reason, goodbyeRead_);
  // The stream is closed: nothing touches the owners' buffers any more.
  std::vector<Owner*> released;
  for (std::size_t i = 0; i < inFlight_ && i < queue_.size(); ++i)
    if (queue_[i].owner && queue_[i].abandoned) released.push_back(queue_[i].owner);
  if (drainingRead_) released.push_back(std::exchange(drainingRead_, nullptr));
  queue_.clear();
  inFlight_ = 0;
  for (Owner* o : released) sink_.onTransferDone(*o, true);
}

asio::awaitable<void> Link::fill(std::size_t n) {
  if (rend_ - rbegin_ >= n) co_return;
  // Everything read so far is parsed: read to the start of the buffer. (Else
  // reads creep towards its end, and a frame that meets the end costs a
  // second read: one extra system call every few calls at 256 ranks.)
  if (rbegin_ == rend_) rbegin_ = rend_ = 0;
  if (rbegin_ + n > rbuf_.size()) {  // compact; grow when `n` does not fit (a large control frame, a payload rest)
    std::memmove(rbuf_.data(), rbuf_.data() + rbegin_, rend_ - rbegin_);
    rend_ -= rbegin_;
    rbegin_ = 0;
    if (n > rbuf_.size()) rbuf_.resize(n);
  }
  while (rend_ - rbegin_ < n) {
    // Wait for readiness, then read what is there. A read that returns less
    // than it asked for emptied the stream, so the next read waits for the
    // next readiness event instead of trying (and failing with EAGAIN) first:
    // one system call per arriving batch of frames, not two.
    if (!mayHaveData_) co_await stream_->readable();
    std::size_t space = rbuf_.size() - rend_;
    boost::system::error_code ec;
    std::size_t got = stream_->readSomeNow(asio::buffer(rbuf_.data() + rend_, space), ec);
    if (ec == asio::error::would_block) {
      mayHaveData_ = false;
      continue;
    }
    if (ec) throw boost::system::system_error(ec);
    rend_ += got;
    mayHaveData_ = got == space;
    if (mayHaveData_ && rbuf_.size() < kReadAhead) rbuf_.resize(std::min(rbuf_.size() * 2, kReadAhead));
  }
}

// Moves `len` payload bytes to pendingDst_ (or drops them when it is null):
// first what the read-ahead already holds, then small rests through the
// read-ahead (which may pick up the next frames too), large rests straight
// into the destination with no intermediate copy.
asio::awaitable<void> Link::readPayload(std::size_t len) {
  std::size_t done = 0;
  while (done < len) {
    std::size_t have = std::min(len - done, rend_ - rbegin_);
    if (have) {
      if (pendingDst_) std::memcpy(pendingDst_ + done, rbuf_.data() + rbegin_, have);
      rbegin_ += have;
      done += have;
      continue;
    }
    std::size_t left = len - done;
    if (left <= kReadAhead / 2 || !pendingDst_) {
      co_await fill(std::min(left, kReadAhead));
    } else {
      directRead_ = true;
      co_await stream_->read(asio::buffer(pendingDst_ + done, left));
      directRead_ = false;
      mayHaveData_ = true;
      done += left;
    }
  }
}

// A large frame whose receive is not posted yet may be parked (Target::Wait):
// its payload stays in the stream until the receive is posted and is then
// read straight into it, so no rank holds a second copy of a large block.
// It waits at most kParkLimit; then it is read into the stash as any other.
asio::awaitable<void> Link::readDataFrame(const wire::FrameHeader& h) {
  Target t = sink_.onDataHeader(*this, h, true);
  while (t.where == Target::Where::Wait) {
    parked_ = h;
    unparked_ = false;
    // The receive is posted by an operation the driver resumes after this
    // handler returns; its unpark() cancels the wait.
    parkTimer_.expires_after(kParkLimit);
    auto [ec] = co_await parkTimer_.async_wait(asio::as_tuple(asio::use_awaitable));
    if (!ec && !unparked_) stashParked_ = true;  // waited long enough: read it into the stash
    parked_.reset();
    if (state_ == State::Closed) co_return;
    t = sink_.onDataHeader(*this, h, !std::exchange(stashParked_, false));
  }
  std::vector<unsigned char> stash;
  if (t.where == Target::Where::Stash) stash.resize(h.length);
  pendingOwner_ = t.owner;
  pendingDst_ = t.where == Target::Where::Posted  ? static_cast<unsigned char*>(t.buf)
                : t.where == Target::Where::Stash ? stash.data()
                                                  : nullptr;
  co_await readPayload(h.length);
  if (drainingRead_) {  // abandoned during the direct read: its buffer is free now
    sink_.onTransferDone(*std::exchange(drainingRead_, nullptr), true);
    t = Target{};
  }
  if (t.where == Target::Where::Posted && pendingOwner_ == nullptr) t = Target{};  // abandoned meanwhile
  pendingOwner_ = nullptr;
  pendingDst_ = nullptr;
  sink_.onDataComplete(*this, h, t, std::move(stash));
}

asio::awaitable<void> Link::readLoop() {
  auto self = shared_from_this();
  try {
    for (;;) {
      co_await fill(wire::kHeaderBytes);
      std::string why;
      auto h = wire::decodeHeader(rbuf_.data() + rbegin_, limits_.maxPayload, &why);
      if (!h) {
        log::warn(limits_.logRank, "link to rank {} ({}): {}; closing it", peer_, remote_, why);
        fail("protocol error from peer: " + why);
        co_return;
      }
      rbegin_ += wire::kHeaderBytes;
      if (h->kind == wire::Kind::P2P || h->kind == wire::Kind::Collective) {
        co_await readDataFrame(*h);
      } else {
        std::vector<unsigned char> payload(h->length);
        pendingDst_ = payload.data();
        co_await readPayload(h->length);
        pendingDst_ = nullptr;
        if (h->kind == wire::Kind::Goodbye) {
          try {
            onGoodbyeFrame(payload);
          } catch (const std::invalid_argument& e) {
            fail(std::string("malformed goodbye: ") + e.what());
            co_return;
          }
        } else if (h->kind == wire::Kind::GoodbyeAck) {
          ackRead_ = true;
          closeIfDone();
        } else {
          sink_.onControlFrame(*this, *h, std::move(payload));
        }
      }
      if (state_ == State::Closed) co_return;
    }
  } catch (const boost::system::system_error& e) {
    if (state_ == State::Closed) co_return;
    if (e.code() == asio::error::eof)
      fail(goodbyeRead_ ? "closed after goodbye" : "connection closed by peer (EOF)");
    else
      fail("read failed: " + e.code().message());
  }
}

}  // namespace tether::link
