#include "link/link.hpp"

#include <stdexcept>
#include <utility>

namespace tether::link {

Link::Link(asio::io_context& io, LinkSink& sink, int peer, std::uint32_t epoch, LinkLimits limits)
    : io_(io),
      sink_(sink),
      peer_(peer),
      epoch_(epoch),
      limits_(limits),
      writer_(*this, io),
      reader_(*this, io, limits.maxPayload) {}

void Link::attach(std::shared_ptr<Stream> stream, bool dialedByUs) {
  if (state_ != State::Dialing) return;
  dialedByUs_ = dialedByUs;
  remote_ = stream->peer();
  stream_ = std::move(stream);
  state_ = close_.goodbyeSent() ? State::Closing : State::Up;
  reader_.start(shared_from_this());
  writer_.start();
}

void Link::enqueue(OutFrame frame) {
  // R1: after a goodbye only the ack may follow; the owner sends later
  // frames on a new link.
  if (!close_.mayQueue(frame.ack)) throw std::logic_error("a frame queued on a link after its goodbye");
  if (state_ == State::Closed) return;
  writer_.push(std::move(frame));
  if (writing() && !writer_.busy()) writer_.start();
}

void Link::sendGoodbye(wire::GoodbyeMode mode) {
  if (close_.goodbyeSent() || state_ == State::Closed) return;
  unpark(true);  // the ack comes behind the parked frame
  enqueue(controlFrame(wire::Kind::Goodbye, wire::encodeGoodbye(mode)));
  close_.sent(mode);
  if (state_ == State::Up) state_ = State::Closing;
}

void Link::onGoodbyeFrame(const std::vector<unsigned char>& payload) {
  const wire::GoodbyeMode mode = close_.read(payload);  // throws on a malformed one
  if (state_ == State::Up) state_ = State::Closing;
  sink_.onGoodbye(*this, mode);
  // Everything the peer sent before its goodbye has been read: say so.
  OutFrame ack = controlFrame(wire::Kind::GoodbyeAck, std::vector<unsigned char>{});
  ack.ack = true;
  enqueue(std::move(ack));
}

void Link::closeIfDone() {
  if (state_ != State::Closing || !close_.mayClose()) return;
  state_ = State::Closed;
  clean_ = true;
  stream_->close();
  sink_.onLinkDown(*this, "closed after goodbye", true);
}

std::vector<Owner*> Link::ownersWithQueuedFrames() const { return writer_.queuedOwners(); }

int Link::abandon(Owner* owner) {
  if (state_ == State::Closed) return 0;  // fail() released what was left
  return writer_.abandon(owner) + reader_.abandon(owner);
}

void Link::unpark(bool stash) { reader_.unpark(stash); }

void Link::fail(const std::string& reason) {
  if (state_ == State::Closed) return;
  state_ = State::Closed;
  unpark(true);
  // The owner may drop its last reference to this link in onLinkDown.
  auto self = weak_from_this().lock();
  if (stream_) stream_->close();
  sink_.onLinkDown(*this, reason, close_.goodbyeRead());
  // The stream is closed: nothing touches the owners' buffers any more.
  std::vector<Owner*> released = writer_.close();
  if (Owner* o = reader_.close()) released.push_back(o);
  for (Owner* o : released) sink_.onTransferDone(*o, true);
}

}  // namespace tether::link
