// The host-local messages (host_message.hpp) and the host's socket names
// (hostSocketName, groupSocketName: host_group.hpp).
#include "rendezvous/host_message.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <stdexcept>

#include "base/bytes.hpp"
#include "base/crypto.hpp"
#include "base/descriptors.hpp"
#include "rendezvous/host_group.hpp"

namespace tether::rdv {
namespace host {
namespace {

constexpr std::uint32_t kMaxMessage = 1u << 30;

using Head = std::array<unsigned char, 5>;

Head headOf(Msg type, const Bytes& payload) {
  auto len = static_cast<std::uint32_t>(payload.size() + 1);
  return {static_cast<unsigned char>(len), static_cast<unsigned char>(len >> 8), static_cast<unsigned char>(len >> 16),
          static_cast<unsigned char>(len >> 24), static_cast<unsigned char>(type)};
}

}  // namespace

asio::awaitable<void> writeMsg(link::Stream& s, Msg type, const Bytes& payload, std::size_t written) {
  const Head head = headOf(type, payload);
  std::vector<asio::const_buffer> bufs;
  if (written < head.size()) bufs.push_back(asio::buffer(head) + written);
  bufs.push_back(asio::const_buffer(payload.data(), payload.size()) +
                 (written > head.size() ? written - head.size() : 0));
  co_await s.write(std::move(bufs));
}

std::size_t writeNow(link::Stream& s, Msg type, const Bytes& payload) {
  const Head head = headOf(type, payload);
  const asio::const_buffer bufs[] = {asio::buffer(head), asio::const_buffer(payload.data(), payload.size())};
  boost::system::error_code ec;
  return s.writeSomeNow(bufs, ec);
}

asio::awaitable<std::pair<Msg, Bytes>> readMsg(link::Stream& s) {
  unsigned char head[5];
  const asio::mutable_buffer headBuf(head, sizeof head);
  co_await s.read(headBuf);
  std::uint32_t len = head[0] | head[1] << 8 | head[2] << 16 | static_cast<std::uint32_t>(head[3]) << 24;
  if (len == 0 || len > kMaxMessage) throw std::invalid_argument("malformed host-local message");
  Bytes b(len - 1);
  const asio::mutable_buffer body(b.data(), b.size());
  if (!b.empty()) co_await s.read(body);
  co_return std::pair{static_cast<Msg>(head[4]), std::move(b)};
}

Bytes encodeCause(const Cause& c) {
  Bytes b(5 + c.text.size());
  b[0] = static_cast<unsigned char>(c.code);
  le::store(b.data() + 1, static_cast<std::int32_t>(c.peer));
  std::copy(c.text.begin(), c.text.end(), b.begin() + 5);
  return b;
}

Cause decodeCause(const Bytes& b) {
  if (b.size() < 5 || b[0] > static_cast<unsigned char>(ErrorCode::System))
    throw std::invalid_argument("malformed host-local cause");
  return {static_cast<ErrorCode>(b[0]), le::load<std::int32_t>(b.data() + 1), std::string(b.begin() + 5, b.end())};
}

std::string reasonOf(const boost::system::system_error& e) {
  return e.code() == asio::error::eof ? std::string("it closed the connection") : e.code().message();
}

}  // namespace host

std::string hostSocketName(const wire::Secret& secret, std::uint64_t worldId, int nranks, std::uint64_t hostId) {
  char ns[128] = {};
  ssize_t n = ::readlink("/proc/self/ns/net", ns, sizeof ns - 1);
  std::string identity =
      fmt::format("tether-host-local|{}|{}|{:016x}|{}", worldId, nranks, hostId, n > 0 ? std::string(ns, n) : "");
  auto d = crypto::hmacSha256(secret.data(), secret.size(), identity.data(), identity.size());
  std::string name = "@tether-";
  for (int i = 0; i < 8; ++i) name += fmt::format("{:02x}", d[i]);
  return name;
}

std::string groupSocketName(const std::string& host, int group) { return fmt::format("{}-{}", host, group); }

}  // namespace tether::rdv
