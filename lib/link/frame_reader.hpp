// The read side's frame parser, without I/O: a per-peer read-ahead buffer and
// where the frame being read stands (header, then payload). The link's read
// loop asks it where the next read goes (readBuffer), tells it how many bytes
// landed there (arrived), and steps it: a header to place, a payload that is
// complete, or "read more". A payload goes to the destination the link gives
// it (expect): what the read-ahead holds is copied there, and a large rest is
// read straight into it. Progress thread only.
#pragma once

#include <boost/asio/buffer.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "base/layer.hpp"
#include "wire/frame.hpp"

TETHER_LAYER(3, "link");

namespace tether::link {

class FrameReader {
 public:
  enum class Step {
    More,     // read more bytes (readBuffer)
    Header,   // header() is a new frame's: say where its payload goes (expect)
    Payload,  // the current frame's payload is in place
    Bad,      // a malformed header (why())
  };

  explicit FrameReader(std::uint64_t maxPayload);

  // Where the next read goes: straight into the payload's destination (a rest
  // larger than half the read-ahead, nothing of it buffered), else the
  // read-ahead's free space.
  boost::asio::mutable_buffer readBuffer();
  // `n` bytes landed in the last readBuffer().
  void arrived(std::size_t n);
  // The last readBuffer() is the destination.
  bool readingDirect() const { return direct_; }

  Step step();
  const wire::FrameHeader& header() const { return header_; }
  const std::string& why() const { return why_; }
  // The payload of header() goes to `dst` (header().length bytes; nullptr: dropped).
  void expect(unsigned char* dst);
  // The rest of the payload goes to `dst` instead (nullptr: dropped).
  void redirect(unsigned char* dst) { dst_ = dst; }
  // Between a header and the end of its payload.
  bool midFrame() const { return state_ != State::Header; }

 private:
  enum class State { Header, Target, Payload };
  std::size_t buffered() const { return end_ - begin_; }

  const std::uint64_t maxPayload_;
  std::vector<unsigned char> buf_;
  std::size_t begin_ = 0, end_ = 0;  // unparsed bytes of buf_
  State state_ = State::Header;
  wire::FrameHeader header_{};
  unsigned char* dst_ = nullptr;
  std::size_t done_ = 0;  // payload bytes in place
  bool direct_ = false;
  std::size_t asked_ = 0;  // size of the last read-ahead readBuffer()
  std::string why_;
};

}  // namespace tether::link
