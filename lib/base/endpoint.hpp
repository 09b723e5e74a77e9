// Addresses: "host:port" parsing, interface choice (TETHER_SOCKET_IFNAME /
// TETHER_SOCKET_FAMILY) and conversion to PeerAddress.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <string>

#include "base/peer_address.hpp"
#include "base/layer.hpp"
#include "base/settings.hpp"

TETHER_LAYER(0, "base");

namespace tether {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

struct HostPort {
  std::string host;
  std::uint16_t port = 0;
};

// "host:port", "[v6addr]:port" or "v6addr" with no port (port 0). Throws
// Error{InvalidArgument}.
HostPort parseHostPort(const std::string& text);
// Numeric address or a name (resolved once, blocking; only used at start-up).
asio::ip::address resolveHost(const std::string& host);
std::string toString(const tcp::endpoint& ep);

PeerAddress toPeerAddress(const tcp::endpoint& ep, std::uint64_t hostId);
tcp::endpoint toEndpoint(const PeerAddress& a);

// The address this rank listens on for peers (lib/base/interfaces.cpp,
// docs/configuration.md): `explicitHost` if given, else an interface matching
// TETHER_SOCKET_IFNAME / TETHER_SOCKET_FAMILY; else, skipping loopback,
// docker*, virbr*, veth* and link-local addresses: for an unspecified `root`
// (choosing the root itself) the default route's interface, else the first
// usable one; for a known root the interface on its subnet, else the address
// the route to it leaves from; loopback when the root is on loopback, or (with
// a WARN) when nothing else is up. Logs the choice at INFO under `rank`.
// TETHER_SOCKET_IFNAME and TETHER_SOCKET_FAMILY as read when the bootstrap
// started (settings::Values); empty: unset.
struct InterfaceFilter {
  std::string ifname;
  std::string family;
};
InterfaceFilter interfaceFilter(const settings::Values& values);
asio::ip::address chooseListenAddress(const asio::ip::address& root, const std::string& explicitHost,
                                      const InterfaceFilter& filter, int rank = -1);
// The same, with the filter read from the environment now (through the table
// of variables, checked): for callers outside a bootstrap (createUniqueId).
asio::ip::address chooseListenAddress(const asio::ip::address& root, const std::string& explicitHost, int rank = -1);

// Whether an interface name passes a TETHER_SOCKET_IFNAME filter:
// "eth,ib" prefixes; "^docker,lo" excludes prefixes; "=eth0" exact names.
bool interfaceMatches(const std::string& filter, const std::string& name);

// This rank's host id (docs/design.md, "Host identity"): a hash of `given`
// (TETHER_HOST_ID) when it is not empty, else of the host name and the
// kernel's boot id, so two machines that share a host name differ.
std::uint64_t thisHostId(const std::string& given = "");

}  // namespace tether
