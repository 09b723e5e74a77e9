// Sockets that createUniqueId() bound for a future rank 0. Keeping the socket
// bound (rather than picking a port and closing it) means no other program
// can take the port between creating the id and rank 0 starting; a forked
// child inherits the descriptor and adopts it. The socket does not listen and
// has SO_REUSEADDR, so a rank 0 that cannot inherit it (the creator fork+execs
// its ranks; the descriptor is close-on-exec) binds the same port itself.
#pragma once

#include <cstdint>
#include <optional>

#include "base/layer.hpp"
#include "base/peer_address.hpp"

TETHER_LAYER(4, "rendezvous");

namespace tether::reserved {

// Binds `addr` (port 0 picks one), without listening; returns the bound
// address. Throws Error{System} naming the address.
PeerAddress reserve(const PeerAddress& addr);
// Hands the descriptor over to the caller (rank 0), or nullopt.
std::optional<int> take(const PeerAddress& addr);
// Closes a reservation this process holds (a launcher after forking ranks).
void release(const PeerAddress& addr);

}  // namespace tether::reserved
