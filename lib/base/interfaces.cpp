// Which local address a rank listens on (docs/configuration.md, "Network"):
// TETHER_SOCKET_IFNAME when set; otherwise usable interfaces only — up, not
// loopback, not a container or VM bridge (docker*, virbr*, veth*), not a
// link-local address — preferring the default route's interface for the root
// and the interface on the root's subnet for the other ranks; loopback only
// when nothing else is up, with a WARN.
#include <ifaddrs.h>
#include <net/if.h>
#include <net/route.h>
#include <unistd.h>

#include <fmt/format.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <cstring>
#include <memory>
#include <optional>
#include <sstream>
#include <vector>

#include "base/descriptors.hpp"
#include "base/endpoint.hpp"
#include "base/env.hpp"
#include "base/log.hpp"
#include "base/settings.hpp"
#include "tether/error.hpp"

namespace tether {
namespace {

using Address = asio::ip::address;

std::vector<std::string> splitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

int wantedFamily(const std::string& given) {
  if (given.empty()) return 0;
  const std::string* f = &given;
  if (*f == "AF_INET" || *f == "inet" || *f == "4" || *f == "ipv4") return 4;
  if (*f == "AF_INET6" || *f == "inet6" || *f == "6" || *f == "ipv6") return 6;
  throw Error(ErrorCode::InvalidArgument, "TETHER_SOCKET_FAMILY='" + *f + "' (use AF_INET or AF_INET6)");
}

int familyOf(const Address& a) { return a.is_v4() ? 4 : 6; }

struct Interface {
  std::string name;
  Address addr, mask;
  bool loopback = false;
};

Address fromSockaddr(const sockaddr* sa) {
  if (sa->sa_family == AF_INET)
    return asio::ip::address_v4(ntohl(reinterpret_cast<const sockaddr_in*>(sa)->sin_addr.s_addr));
  asio::ip::address_v6::bytes_type b;
  std::memcpy(b.data(), &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, b.size());
  return asio::ip::address_v6(b);
}

// Every IPv4/IPv6 address of an interface that is up, in the kernel's order.
std::vector<Interface> upInterfaces() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0)
    throw Error(ErrorCode::System, std::string("getifaddrs failed: ") + std::strerror(errno));
  std::unique_ptr<ifaddrs, decltype(&::freeifaddrs)> guard(list, ::freeifaddrs);
  std::vector<Interface> out;
  for (auto* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || !(i->ifa_flags & IFF_UP)) continue;
    if (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6) continue;
    Interface c{i->ifa_name, fromSockaddr(i->ifa_addr), {}, (i->ifa_flags & IFF_LOOPBACK) != 0};
    if (i->ifa_netmask && i->ifa_netmask->sa_family == i->ifa_addr->sa_family) c.mask = fromSockaddr(i->ifa_netmask);
    out.push_back(std::move(c));
  }
  return out;
}

bool linkLocal(const Address& a) {
  if (a.is_v4()) return (a.to_v4().to_uint() & 0xffff0000u) == 0xa9fe0000u;  // 169.254/16
  return a.to_v6().is_link_local();
}

bool bridgeOrVirtual(const std::string& name) {
  for (const char* prefix : {"docker", "virbr", "veth"})
    if (name.rfind(prefix, 0) == 0) return true;
  return false;
}

// The masked bytes of `a` (network order) and the prefix length of `mask`.
std::vector<unsigned char> bytesOf(const Address& a) {
  if (a.is_v4()) {
    auto b = a.to_v4().to_bytes();
    return {b.begin(), b.end()};
  }
  auto b = a.to_v6().to_bytes();
  return {b.begin(), b.end()};
}

bool onSubnet(const Interface& i, const Address& root) {
  if (i.mask.is_unspecified() || familyOf(i.addr) != familyOf(root) || familyOf(i.mask) != familyOf(root)) return false;
  auto a = bytesOf(i.addr), m = bytesOf(i.mask), r = bytesOf(root);
  for (std::size_t k = 0; k < a.size(); ++k)
    if ((a[k] & m[k]) != (r[k] & m[k])) return false;
  return true;
}

std::string subnetText(const Interface& i) {
  auto a = bytesOf(i.addr), m = bytesOf(i.mask);
  int bits = 0;
  for (std::size_t k = 0; k < a.size(); ++k) {
    a[k] &= m[k];
    for (int b = 0; b < 8; ++b) bits += (m[k] >> b) & 1;
  }
  Address net = i.addr.is_v4() ? Address(asio::ip::address_v4({a[0], a[1], a[2], a[3]})) : [&] {
    asio::ip::address_v6::bytes_type b;
    std::copy(a.begin(), a.end(), b.begin());
    return Address(asio::ip::address_v6(b));
  }();
  return net.to_string() + "/" + std::to_string(bits);
}

// The interface of the default route with the lowest metric, from the
// kernel's routing tables (this network namespace's).
std::optional<std::string> defaultRouteInterface(int family) {
  std::optional<std::string> best;
  unsigned long bestMetric = 0;
  std::string line;
  if (family == 4) {
    std::istringstream in(fds::readFile("/proc/net/route"));
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string name, dest, gateway, mask;
      unsigned long flags = 0, refcnt = 0, use = 0, metric = 0;
      if (!(f >> name >> dest >> gateway >> std::hex >> flags >> refcnt >> use >> std::dec >> metric >> mask)) continue;
      if (dest != "00000000" || mask != "00000000" || !(flags & RTF_UP)) continue;
      if (!best || metric < bestMetric) best = name, bestMetric = metric;
    }
  } else {
    std::istringstream in(fds::readFile("/proc/net/ipv6_route"));
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string dest, destLen, src, srcLen, nextHop, name;
      unsigned long metric = 0, refcnt = 0, use = 0, flags = 0;
      if (!(f >> dest >> destLen >> src >> srcLen >> nextHop >> std::hex >> metric >> refcnt >> use >> flags >> name))
        continue;
      if (dest != std::string(32, '0') || destLen != "00" || !(flags & RTF_UP) || (flags & RTF_REJECT) || name == "lo")
        continue;
      if (!best || metric < bestMetric) best = name, bestMetric = metric;
    }
  }
  return best;
}

Address chosen(const Address& a, const std::string& where, int rank) {
  log::info(rank, "listen address {} {}", a.to_string(), where);
  return a;
}

Address byFilter(const std::string& filter, int family, int rank) {
  for (const auto& i : upInterfaces()) {
    if (!interfaceMatches(filter, i.name) || (family && familyOf(i.addr) != family)) continue;
    if (i.addr.is_v6() && linkLocal(i.addr)) continue;  // needs a scope id; skip
    return chosen(i.addr, "on " + i.name + " (TETHER_SOCKET_IFNAME='" + filter + "')", rank);
  }
  throw Error(ErrorCode::InvalidArgument,
              (rank >= 0 ? fmt::format("rank {}: ", rank) : std::string()) + "TETHER_SOCKET_IFNAME='" + filter +
                  "' matches no interface that is up" + (family ? " with the family of TETHER_SOCKET_FAMILY" : ""),
              rank);
}

// The local address the kernel would send from to reach `root` (a UDP connect
// sends nothing).
Address routeTo(const Address& root) {
  asio::io_context io;
  asio::ip::udp::socket probe(io);
  boost::system::error_code ec;
  const auto protocol = root.is_v6() ? asio::ip::udp::v6() : asio::ip::udp::v4();
  const int fd = fds::socket(protocol.family(), protocol.type(), protocol.protocol(), nullptr);  // close-on-exec
  if (fd < 0) ec.assign(errno, boost::system::system_category());
  if (!ec) probe.assign(protocol, fd, ec);
  if (ec && fd >= 0 && !probe.is_open()) ::close(fd);
  if (!ec) probe.connect({root, 9}, ec);
  if (ec) throw Error(ErrorCode::System, "no route to root address " + root.to_string() + ": " + ec.message());
  return probe.local_endpoint().address();
}

}  // namespace

bool interfaceMatches(const std::string& filter, const std::string& name) {
  std::string f = filter;
  bool exclude = false, exact = false;
  if (!f.empty() && f[0] == '^') {
    exclude = true;
    f.erase(0, 1);
  }
  if (!f.empty() && f[0] == '=') {
    exact = true;
    f.erase(0, 1);
  }
  bool hit = false;
  for (const auto& item : splitList(f)) {
    if (exact ? name == item : name.rfind(item, 0) == 0) {
      hit = true;
      break;
    }
  }
  return exclude ? !hit : hit;
}

InterfaceFilter interfaceFilter(const settings::Values& values) {
  return {values.text("TETHER_SOCKET_IFNAME").value_or(""), values.text("TETHER_SOCKET_FAMILY").value_or("")};
}

Address chooseListenAddress(const Address& root, const std::string& explicitHost, int rank) {
  InterfaceFilter filter;
  filter.ifname = settings::text("TETHER_SOCKET_IFNAME").value_or("");
  filter.family = settings::text("TETHER_SOCKET_FAMILY").value_or("");
  return chooseListenAddress(root, explicitHost, filter, rank);
}

Address chooseListenAddress(const Address& root, const std::string& explicitHost, const InterfaceFilter& filter,
                            int rank) {
  if (!explicitHost.empty()) return resolveHost(explicitHost);
  int family = wantedFamily(filter.family);
  if (!filter.ifname.empty()) return byFilter(filter.ifname, family, rank);
  if (root.is_loopback())
    return chosen(root.is_v6() ? Address(asio::ip::address_v6::loopback()) : Address(asio::ip::address_v4::loopback()),
                  "(loopback: the root is on loopback)", rank);
  std::vector<Interface> usable;
  for (auto& i : upInterfaces())
    if (!i.loopback && !bridgeOrVirtual(i.name) && !linkLocal(i.addr) && (!family || familyOf(i.addr) == family))
      usable.push_back(std::move(i));

  if (!root.is_unspecified()) {  // a rank joining a known root
    for (const auto& i : usable)
      if (onSubnet(i, root))
        return chosen(i.addr, "on " + i.name + " (on the root's subnet " + subnetText(i) + ")", rank);
    auto a = routeTo(root);
    return chosen(a, "(the route to the root " + root.to_string() + " leaves from it)", rank);
  }

  // Choosing the root's own address (createUniqueId()): IPv4 before IPv6.
  std::vector<int> families = family ? std::vector<int>{family} : std::vector<int>{4, 6};
  for (int fam : families)
    if (auto name = defaultRouteInterface(fam))
      for (const auto& i : usable)
        if (i.name == *name && familyOf(i.addr) == fam)
          return chosen(i.addr, "on " + i.name + " (the default route's interface)", rank);
  for (int fam : families)
    for (const auto& i : usable)
      if (familyOf(i.addr) == fam)
        return chosen(i.addr, "on " + i.name + " (the first usable interface; no default route through one)", rank);
  Address lo = family == 6 ? Address(asio::ip::address_v6::loopback()) : Address(asio::ip::address_v4::loopback());
  log::warn(rank,
            "no usable network interface is up (loopback, docker*, virbr*, veth* and link-local addresses are "
            "skipped): listening on loopback {}, so only ranks on this host can reach it; set TETHER_SOCKET_IFNAME "
            "to choose an interface",
            lo.to_string());
  return lo;
}

}  // namespace tether
