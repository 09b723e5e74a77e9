// What a world is made with: its rank, the secret, the deadlines, the link
// budget and the settings read when the bootstrap started.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "base/endpoint.hpp"
#include "base/layer.hpp"
#include "tether/bootstrap.hpp"
#include "tether/detail/core/window.hpp"
#include "wire/handshake.hpp"

TETHER_LAYER(6, "core");

namespace tether {

struct WorldConfig {
  int rank = 0;
  int nranks = 1;
  wire::Secret secret{};
  std::uint64_t worldId = 0;
  boost::asio::ip::tcp::endpoint root;
  std::chrono::milliseconds timeout = kDefaultTimeout;
  std::chrono::steady_clock::time_point began{};  // the rendezvous deadline counts from here (unset: create())
  std::chrono::milliseconds handshakeTimeout{10000};
  std::uint64_t maxPayload = detail::kMaxPayloadBytes;
  std::size_t eagerBytes = 64 * 1024;  // sends up to this size are copied and forgotten
  // Point-to-point bytes (payload + window::kMessageCost each) sent to
  // one peer and not yet received there; past it sends wait (TETHER_P2P_WINDOW_BYTES).
  std::uint64_t p2pWindow = detail::core::window::kP2PBytes;
  std::string listenHost;
  std::string advertise;
  std::function<std::string(const std::string&)> advertiseFor;
  int keepaliveIdleS = 10, keepaliveIntervalS = 2, keepaliveCount = 3;
  // Open links (current and lingering) above which the least recently used
  // idle link is closed (TETHER_MAX_LINKS); a soft budget.
  int maxLinks = 64;  // why 64: docs/benchmarks.md, "Scale"
  int maxDials = 32;  // dials in flight (TcpOptions::maxDials)
  // From the configuration read when the bootstrap started (settings::Values):
  // a variable changed later is not seen (docs/configuration.md, "Read once").
  std::string rendezvous = "auto";  // TETHER_RENDEZVOUS
  int rendezvousTreeRadix = 8;      // TcpOptions::rendezvousTreeRadix
  bool hostLocal = true;            // TETHER_HOST_LOCAL (with rendezvous "auto")
  int localRanks = 0;               // TETHER_LOCAL_NRANKS, else the launcher's local size; 0: unknown
  int hostGroupMax = 64;            // TcpOptions::hostGroupMax
  int pollUs = 50;                  // TcpOptions::pollUs (0: never poll)
  std::string hostId;               // TETHER_HOST_ID (empty: host name and boot id, thisHostId)
  InterfaceFilter interfaces;       // TETHER_SOCKET_IFNAME, TETHER_SOCKET_FAMILY
};

}  // namespace tether
