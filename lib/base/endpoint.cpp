#include "base/endpoint.hpp"

#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <unistd.h>

#include <boost/asio/ip/udp.hpp>
#include <boost/asio/io_context.hpp>
#include <charconv>
#include <memory>
#include <vector>

#include "base/crypto.hpp"
#include "base/env.hpp"
#include "tether/error.hpp"

namespace tether {
namespace {

std::vector<std::string> splitList(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == ',') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

int wantedFamily() {
  auto f = env::get("TETHER_SOCKET_FAMILY");
  if (!f) return 0;
  if (*f == "AF_INET" || *f == "inet" || *f == "4" || *f == "ipv4") return 4;
  if (*f == "AF_INET6" || *f == "inet6" || *f == "6" || *f == "ipv6") return 6;
  throw Error(ErrorCode::InvalidArgument,
              "TETHER_SOCKET_FAMILY='" + *f + "' (use AF_INET or AF_INET6)");
}

}  // namespace

HostPort parseHostPort(const std::string& text) {
  HostPort hp;
  std::string portText;
  if (!text.empty() && text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string::npos)
      throw Error(ErrorCode::InvalidArgument, "address '" + text + "': missing ']'");
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
    throw Error(ErrorCode::InvalidArgument,
                "cannot resolve host '" + host + "': " + ::gai_strerror(rc));
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
  if (ep.address().is_v6()) return "[" + ep.address().to_string() + "]:" + std::to_string(ep.port());
  return ep.address().to_string() + ":" + std::to_string(ep.port());
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

bool interfaceMatches(const std::string& filter, const std::string& name) {
  std::string f = filter;
  bool exclude = false, exact = false;
  if (!f.empty() && f[0] == '^') { exclude = true; f.erase(0, 1); }
  if (!f.empty() && f[0] == '=') { exact = true; f.erase(0, 1); }
  bool hit = false;
  for (const auto& item : splitList(f)) {
    if (exact ? name == item : name.rfind(item, 0) == 0) { hit = true; break; }
  }
  return exclude ? !hit : hit;
}

asio::ip::address chooseListenAddress(const asio::ip::address& root, const std::string& explicitHost) {
  if (!explicitHost.empty()) return resolveHost(explicitHost);
  int family = wantedFamily();
  if (auto filter = env::get("TETHER_SOCKET_IFNAME")) {
    ifaddrs* list = nullptr;
    if (::getifaddrs(&list) != 0)
      throw Error(ErrorCode::System, std::string("getifaddrs failed: ") + std::strerror(errno));
    std::unique_ptr<ifaddrs, decltype(&::freeifaddrs)> guard(list, ::freeifaddrs);
    for (auto* i = list; i; i = i->ifa_next) {
      if (!i->ifa_addr || !(i->ifa_flags & IFF_UP) || !interfaceMatches(*filter, i->ifa_name)) continue;
      int fam = i->ifa_addr->sa_family == AF_INET ? 4 : i->ifa_addr->sa_family == AF_INET6 ? 6 : 0;
      if (fam == 0 || (family && fam != family)) continue;
      if (fam == 4) {
        auto* sa = reinterpret_cast<sockaddr_in*>(i->ifa_addr);
        return asio::ip::address_v4(ntohl(sa->sin_addr.s_addr));
      }
      auto* sa6 = reinterpret_cast<sockaddr_in6*>(i->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&sa6->sin6_addr)) continue;  // needs a scope; skip
      asio::ip::address_v6::bytes_type b;
      std::memcpy(b.data(), &sa6->sin6_addr, b.size());
      return asio::ip::address_v6(b);
    }
    throw Error(ErrorCode::InvalidArgument,
                "TETHER_SOCKET_IFNAME='" + *filter + "' matches no interface that is up" +
                    (family ? " with the family of TETHER_SOCKET_FAMILY" : ""));
  }
  if (root.is_loopback() || root.is_unspecified()) return root.is_v6() ? asio::ip::address(asio::ip::address_v6::loopback())
                                                                       : asio::ip::address(asio::ip::address_v4::loopback());
  // The local address that routes to the root: a UDP connect sends nothing.
  asio::io_context io;
  asio::ip::udp::socket probe(io);
  boost::system::error_code ec;
  probe.open(root.is_v6() ? asio::ip::udp::v6() : asio::ip::udp::v4(), ec);
  if (!ec) probe.connect({root, 9}, ec);
  if (ec)
    throw Error(ErrorCode::System, "no route to root address " + root.to_string() + ": " + ec.message());
  return probe.local_endpoint().address();
}

std::uint64_t thisHostId() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return crypto::hash64("tether-host", name);
}

}  // namespace tether
