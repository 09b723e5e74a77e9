// The observer's side of the handshake (tether-status, docs/troubleshooting.md):
// on a connected stream to a rank, proves the job's secret like a rank does,
// under wire::kObserverRank, and checks the rank's proof back. The rank then
// answers a StatusQuery (and a TableQuery) and closes; the observer is never
// one of its links. The caller bounds the time (it closes the stream).
#pragma once

#include <boost/asio/awaitable.hpp>
#include <cstdint>

#include "base/layer.hpp"
#include "link/stream.hpp"
#include "wire/handshake.hpp"

TETHER_LAYER(3, "link");

namespace tether::link {

// Throws std::runtime_error with the reason (a reject in words, a proof that
// fails, another rank at this address) or boost::system::system_error on I/O.
// `rank`: the rank expected at the other end.
boost::asio::awaitable<void> observerHandshake(Stream& s, const wire::Secret& secret, std::uint64_t worldId,
                                               std::uint32_t rank);

}  // namespace tether::link
