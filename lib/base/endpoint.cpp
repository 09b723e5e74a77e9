#include "base/endpoint.hpp"

#include <fmt/format.h>
#include <netdb.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <memory>

#include "base/crypto.hpp"
#include "base/descriptors.hpp"
#include "tether/error.hpp"

namespace tether {

HostPort parseHostPort(const std::string& text) {
  HostPort hp;
  std::string portText;
  if (!text.empty() && text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string::npos) throw Error(ErrorCode::InvalidArgument, "address '" + text + "': missing ']'");
    hp.host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':')
        throw Error(ErrorCode::InvalidArgument, "address '" + text + "': expected ':' after ']'");
      portText = text.substr(close + 2);
    }
  } else {
    auto colon = text.rfind(':');
    if (colon != std::string::npos && text.find(':') == colon) {
      hp.host = text.substr(0, colon);
      portText = text.substr(colon + 1);
    } else {
      hp.host = text;  // bare IPv6 or a host without a port
    }
  }
  if (hp.host.empty()) throw Error(ErrorCode::InvalidArgument, "address '" + text + "': empty host");
  if (!portText.empty()) {
    unsigned port = 0;
    auto [end, ec] = std::from_chars(portText.data(), portText.data() + portText.size(), port);
    if (ec != std::errc() || end != portText.data() + portText.size() || port > 65535)
      throw Error(ErrorCode::InvalidArgument, "address '" + text + "': bad port '" + portText + "'");
    hp.port = static_cast<std::uint16_t>(port);
  }
  return hp;
}

asio::ip::address resolveHost(const std::string& host) {
  boost::system::error_code ec;
  auto addr = asio::ip::make_address(host, ec);
  if (!ec) return addr;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || !res)
    throw Error(ErrorCode::InvalidArgument, "cannot resolve host '" + host + "': " + ::gai_strerror(rc));
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(res, ::freeaddrinfo);
  if (res->ai_family == AF_INET) {
    auto* sa = reinterpret_cast<sockaddr_in*>(res->ai_addr);
    return asio::ip::address_v4(ntohl(sa->sin_addr.s_addr));
  }
  auto* sa6 = reinterpret_cast<sockaddr_in6*>(res->ai_addr);
  asio::ip::address_v6::bytes_type b;
  std::memcpy(b.data(), &sa6->sin6_addr, b.size());
  return asio::ip::address_v6(b, sa6->sin6_scope_id);
}

std::string toString(const tcp::endpoint& ep) {
  // fmt rather than operator+: GCC 12 at -O3 misreports "[" + string&& as -Wrestrict.
  if (ep.address().is_v6()) return fmt::format("[{}]:{}", ep.address().to_string(), ep.port());
  return fmt::format("{}:{}", ep.address().to_string(), ep.port());
}

PeerAddress toPeerAddress(const tcp::endpoint& ep, std::uint64_t hostId) {
  PeerAddress a;
  a.port = ep.port();
  a.hostId = hostId;
  if (ep.address().is_v4()) {
    a.family = 4;
    auto b = ep.address().to_v4().to_bytes();
    std::copy(b.begin(), b.end(), a.addr.begin());
  } else {
    a.family = 6;
    auto b = ep.address().to_v6().to_bytes();
    std::copy(b.begin(), b.end(), a.addr.begin());
  }
  return a;
}

tcp::endpoint toEndpoint(const PeerAddress& a) {
  if (a.family == 4) {
    asio::ip::address_v4::bytes_type b;
    std::copy(a.addr.begin(), a.addr.begin() + 4, b.begin());
    return {asio::ip::address_v4(b), a.port};
  }
  asio::ip::address_v6::bytes_type b;
  std::copy(a.addr.begin(), a.addr.end(), b.begin());
  return {asio::ip::address_v6(b), a.port};
}

std::uint64_t thisHostId(const std::string& given) {
  if (!given.empty()) return crypto::hash64("tether-host-id", given);
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  // Empty where /proc is not readable: the host name alone.
  std::string boot = fds::readFile("/proc/sys/kernel/random/boot_id");
  boot.erase(std::find_if(boot.begin(), boot.end(), [](char c) { return c == '\n'; }), boot.end());
  return crypto::hash64("tether-host", std::string(name) + '\n' + boot);
}

}  // namespace tether
