#include "link/frame_reader.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace tether::link {
namespace {
// A frame of the default eager size (64 KiB, the writer's kCopyLimit) with its
// header fits one read, with room to spare: the read that takes it all is
// shorter than the buffer, so no second read looks for more (Asio tries
// another read at once after one that filled its buffer).
constexpr std::size_t kReadAhead = 68 * 1024;
// A link starts with a small read-ahead (1 KiB) and doubles it (up to kReadAhead)
// when a read fills it: a rank with a thousand mostly idle links (the root
// during the rendezvous) must not hold the whole read-ahead for each.
constexpr std::size_t kReadAheadStart = 1024;
}  // namespace

FrameReader::FrameReader(std::uint64_t maxPayload) : maxPayload_(maxPayload), buf_(kReadAheadStart) {}

boost::asio::mutable_buffer FrameReader::readBuffer() {
  const std::size_t left = state_ == State::Payload ? header_.length - done_ : 0;
  direct_ = state_ == State::Payload && dst_ && buffered() == 0 && left > kReadAhead / 2;
  if (direct_) return boost::asio::buffer(dst_ + done_, left);
  // Everything read so far is parsed: read to the start of the buffer. (Else
  // reads creep towards its end, and a frame that meets the end costs a
  // second read: one extra system call every few calls at 256 ranks.)
  if (begin_ == end_) begin_ = end_ = 0;
  const std::size_t need = state_ == State::Payload ? std::min(left, kReadAhead) : wire::kHeaderBytes;
  if (begin_ + need > buf_.size()) {  // compact; grow when `need` does not fit
    std::memmove(buf_.data(), buf_.data() + begin_, buffered());
    end_ -= begin_;
    begin_ = 0;
    if (need > buf_.size()) buf_.resize(need);
  }
  asked_ = buf_.size() - end_;
  return boost::asio::buffer(buf_.data() + end_, asked_);
}

void FrameReader::arrived(std::size_t n) {
  if (direct_) {
    done_ += n;
    direct_ = false;
    return;
  }
  end_ += n;
  if (n == asked_ && buf_.size() < kReadAhead) buf_.resize(std::min(buf_.size() * 2, kReadAhead));
}

FrameReader::Step FrameReader::step() {
  switch (state_) {
    case State::Header: {
      if (buffered() < wire::kHeaderBytes) return Step::More;
      auto h = wire::decodeHeader(buf_.data() + begin_, maxPayload_, &why_);
      if (!h) return Step::Bad;
      begin_ += wire::kHeaderBytes;
      header_ = *h;
      state_ = State::Target;
      return Step::Header;
    }
    case State::Target:
      throw std::logic_error("a frame's payload has no destination");
    case State::Payload: {
      const std::size_t n = std::min<std::size_t>(header_.length - done_, buffered());
      if (n && dst_) std::memcpy(dst_ + done_, buf_.data() + begin_, n);
      begin_ += n;
      done_ += n;
      if (done_ < header_.length) return Step::More;
      state_ = State::Header;
      return Step::Payload;
    }
  }
  return Step::More;
}

void FrameReader::expect(unsigned char* dst) {
  dst_ = dst;
  done_ = 0;
  state_ = State::Payload;
}

}  // namespace tether::link
