#include "link/frame_io.hpp"

#include <stdexcept>

namespace tether::link {

asio::awaitable<RawFrame> readFrame(Stream& s, std::uint64_t maxPayload) {
  wire::HeaderBytes hb;
  co_await s.read(asio::buffer(hb));
  std::string why;
  auto h = wire::decodeHeader(hb.data(), maxPayload, &why);
  if (!h) throw std::runtime_error(why);
  RawFrame f{*h, std::vector<unsigned char>(h->length)};
  if (h->length) co_await s.read(asio::buffer(f.payload));
  co_return f;
}

asio::awaitable<void> writeFrame(Stream& s, wire::Kind kind, const std::vector<unsigned char>& payload) {
  wire::FrameHeader h;
  h.kind = kind;
  h.length = payload.size();
  wire::HeaderBytes hb{};
  wire::encodeHeader(h, hb.data());
  std::vector<asio::const_buffer> bufs{asio::const_buffer(hb.data(), hb.size()), asio::buffer(payload)};
  co_await s.write(std::move(bufs));
}

}  // namespace tether::link
