// Listening sockets that createUniqueId() bound for a future rank 0. Keeping
// the socket open (rather than picking a port and closing it) means no other
// process can take the port between creating the id and rank 0 starting; a
// forked child inherits the descriptor and adopts it.
#pragma once

#include <cstdint>
#include <optional>

#include "base/layer.hpp"
#include "base/peer_address.hpp"

TETHER_LAYER(4, "rendezvous");

namespace tether::reserved {

// Binds and listens on `addr` (port 0 picks one); returns the bound address.
// Throws Error{System} naming the address.
PeerAddress reserve(const PeerAddress& addr);
// Hands the descriptor over to the caller (rank 0), or nullopt.
std::optional<int> take(const PeerAddress& addr);
// Closes a reservation this process holds (a launcher after forking ranks).
void release(const PeerAddress& addr);

}  // namespace tether::reserved
