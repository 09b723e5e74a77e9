#include "link/frame_io.hpp"

#include <boost/asio/read.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <stdexcept>

namespace tether::link {

namespace asio = boost::asio;

asio::awaitable<RawFrame> readFrame(asio::ip::tcp::socket& s, std::uint64_t maxPayload) {
  wire::HeaderBytes hb;
  co_await asio::async_read(s, asio::buffer(hb), asio::use_awaitable);
  std::string why;
  auto h = wire::decodeHeader(hb.data(), maxPayload, &why);
  if (!h) throw std::runtime_error(why);
  RawFrame f{*h, std::vector<unsigned char>(h->length)};
  if (h->length) co_await asio::async_read(s, asio::buffer(f.payload), asio::use_awaitable);
  co_return f;
}

asio::awaitable<void> writeFrame(asio::ip::tcp::socket& s, wire::Kind kind, const std::vector<unsigned char>& payload) {
  wire::FrameHeader h;
  h.kind = kind;
  h.length = payload.size();
  auto hb = wire::encodeHeader(h);
  std::array<asio::const_buffer, 2> bufs{asio::buffer(hb), asio::buffer(payload)};
  co_await asio::async_write(s, bufs, asio::use_awaitable);
}

}  // namespace tether::link
