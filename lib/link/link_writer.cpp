#include "link/link_writer.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <algorithm>
#include <array>
#include <cstring>
#include <span>
#include <utility>

#include "link/link.hpp"

namespace tether::link {
namespace {
constexpr auto kBrokenGrace = std::chrono::milliseconds(200);  // LinkWriter::broken
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

void LinkWriter::start() {
  while (link_.writing() && !broken_ && !busy() && !queue_.empty()) {
    std::size_t n = std::min(queue_.size(), kMaxGather), nbufs = 0, total = 0;
    bool ack = false;
    for (std::size_t i = 0; i < n; ++i) {
      const auto& f = queue_[i];
      // The header is written from the writer's own copy: a frame's slot in
      // the queue moves when the queue grows, which it may while the rest of
      // this write is written from the frames (writeRest). Its payload does
      // not move (the caller's buffer, a shared or owned vector's storage).
      headers_[i] = f.header;
      bufs_[nbufs++] = asio::const_buffer(headers_[i].data(), headers_[i].size());
      if (f.len)
        bufs_[nbufs++] = asio::const_buffer(f.ref ? f.ref : f.shared ? f.shared->data() : f.owned.data(), f.len);
      total += f.header.size() + f.len;
      ack = ack || f.ack;
    }
    inFlight_ = n;
    auto seq = std::span(bufs_.data(), nbufs);
    // Small frames nearly always fit the socket buffer: write them now, in
    // this handler, instead of a write operation that completes through the
    // scheduler a round later.
    boost::system::error_code ec;
    std::size_t written = link_.stream_->writeSomeNow(seq, ec);
    if (ec == asio::error::would_block) {
      ec.clear();
      written = 0;
    }
    if (ec) return broken("write failed: " + ec.message());
    if (written == total) {
      finish(true);
      continue;
    }
    // What the kernel did not take: copied when small (the owners are done
    // now), else written from the frames' buffers, which the queue keeps.
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
    if (total - written <= kCopyLimit) {
      tail_.resize(total - written);
      std::size_t at = 0;
      for (const auto& b : rest) {
        std::memcpy(tail_.data() + at, b.data(), b.size());
        at += b.size();
      }
      rest.assign(1, asio::buffer(tail_));
      tailHasAck_ = ack;  // the ack is the last frame ever queued (R1): its bytes are in tail_
      finish(false);
      if (!link_.writing()) return;  // an owner failed the link
    }
    asio::co_spawn(link_.io_, writeRest(link_.shared_from_this(), std::move(rest)), asio::detached);
    return;
  }
  if (idle() && link_.writing()) link_.sink_.onLinkIdle(link_);
}

// The first parameter keeps the link alive until the write ends.
asio::awaitable<void> LinkWriter::writeRest(std::shared_ptr<Link>, std::vector<asio::const_buffer> rest) {
  std::string failure;
  try {
    co_await link_.stream_->write(std::move(rest));
  } catch (const boost::system::system_error& e) {
    failure = "write failed: " + e.code().message();
  }
  if (link_.state_ == Link::State::Closed) co_return;
  if (!failure.empty()) {
    broken(failure);
    co_return;
  }
  if (!tail_.empty()) {
    tail_.clear();
    if (std::exchange(tailHasAck_, false)) link_.close_.ackWritten();
    link_.closeIfDone();
  } else {
    finish(true);
  }
  start();
}

void LinkWriter::finish(bool ackOnWire) {
  // Take the frames off the queue before telling their owners: a woken owner
  // may queue more frames or fail (and prune the queue) right away.
  // At most kMaxGather frames are in flight: their owners fit on the stack
  // (left uninitialised: a std::pair would zero all kMaxGather of them, 1 KiB
  // of stores per completed write).
  struct Done {
    Owner* owner;
    bool abandoned;
  };
  std::array<Done, kMaxGather> done;
  std::size_t owners = 0;
  for (std::size_t i = 0; i < inFlight_; ++i) {
    if (queue_.front().owner) done[owners++] = Done{queue_.front().owner, queue_.front().abandoned};
    if (queue_.front().ack && ackOnWire) link_.close_.ackWritten();
    queue_.pop_front();
  }
  inFlight_ = 0;
  for (std::size_t i = 0; i < owners; ++i) link_.sink_.onTransferDone(*done[i].owner, done[i].abandoned);
  link_.closeIfDone();
}

std::vector<Owner*> LinkWriter::queuedOwners() const {
  std::vector<Owner*> owners;
  for (std::size_t i = 0; i < queue_.size(); ++i)
    if (queue_[i].owner) owners.push_back(queue_[i].owner);
  return owners;
}

int LinkWriter::abandon(Owner* owner) {
  // Cutting a half-written frame would close a healthy link and make the
  // peer report this rank as lost; the write ends soon (the peer is reading
  // it), so let it finish and hold the owner until then.
  int held = 0;
  for (std::size_t i = 0; i < inFlight_; ++i)
    if (queue_[i].owner == owner && !queue_[i].abandoned) {
      queue_[i].abandoned = true;
      ++held;
    }
  queue_.eraseFrom(inFlight_, [&](const OutFrame& f) { return f.owner == owner; });
  return held;
}

// The peer closed or reset the connection. What it sent before — an abort
// notice naming who aborted, its goodbye — may still wait in our receive
// buffer and says more than the broken write: the read loop reads it and then
// ends the link itself (EOF or reset). Only if it does not within
// kBrokenGrace does the write's failure end it.
void LinkWriter::broken(const std::string& reason) {
  if (link_.state_ == Link::State::Closed || broken_) return;
  broken_ = true;
  link_.unpark(true);
  brokenTimer_.expires_after(kBrokenGrace);
  brokenTimer_.async_wait([self = link_.shared_from_this(), reason](boost::system::error_code ec) {
    if (!ec) self->fail(reason);
  });
}

std::vector<Owner*> LinkWriter::close() {
  brokenTimer_.cancel();
  std::vector<Owner*> released;
  for (std::size_t i = 0; i < inFlight_ && i < queue_.size(); ++i)
    if (queue_[i].owner && queue_[i].abandoned) released.push_back(queue_[i].owner);
  queue_.clear();
  inFlight_ = 0;
  tail_.clear();
  tailHasAck_ = false;
  return released;
}

}  // namespace tether::link
