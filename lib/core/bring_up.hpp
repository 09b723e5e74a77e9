// Bring-up: the listener a rank opens before the rendezvous (the root's at
// the UniqueId's address), the address it advertises, and the world's nodes
// learnt from the rendezvous table.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <functional>
#include <memory>
#include <vector>

#include "base/layer.hpp"
#include "base/peer_address.hpp"
#include "link/tcp_stream.hpp"

TETHER_LAYER(6, "core");

namespace tether {

struct WorldConfig;

// The world's nodes, from the rendezvous table (after the rendezvous; immutable).
struct Topology {
  std::vector<int> nodeOf;   // world rank -> node (nodes numbered by their lowest world rank)
  std::vector<int> ranksOn;  // node -> ranks of the world on it
  // Some node runs more ranks than it has cores: latency is then set by CPU
  // time, and tree algorithms win. Every rank computes the same value.
  bool cpuBound = false;
};

// Opens the TCP listener where `cfg` says — rank 0 at the root address (adopting
// the port createUniqueId() reserved), others on an ephemeral port of the
// interface that reaches the root — and returns the address to advertise.
// Throws Error{System} naming the rank and address.
PeerAddress openListener(boost::asio::io_context& io, const link::TcpOptions& options, const WorldConfig& cfg,
                         std::shared_ptr<link::Listener>& listener);

// Nodes are told apart by their host id; `address(r)` is rank r's entry.
Topology learnTopology(int nranks, const std::function<PeerAddress(int)>& address);

}  // namespace tether
