// Whole-frame reads and writes on a stream that is not (yet) a Link: used by
// the handshake, where every frame is small and read one at a time.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <utility>
#include <vector>

#include "base/layer.hpp"
#include "link/stream.hpp"
#include "wire/frame.hpp"

TETHER_LAYER(3, "link");

namespace tether::link {

struct RawFrame {
  wire::FrameHeader header;
  std::vector<unsigned char> payload;
};

// Throws boost::system::system_error on I/O errors and std::runtime_error
// (with the reason) on a malformed header.
boost::asio::awaitable<RawFrame> readFrame(Stream& s, std::uint64_t maxPayload);
boost::asio::awaitable<void> writeFrame(Stream& s, wire::Kind kind, const std::vector<unsigned char>& payload);

}  // namespace tether::link
