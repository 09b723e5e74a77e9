// chaos_proxy.hpp — a seeded userspace TCP proxy that makes the network misbehave.
//
// This kernel has no tc netem, so tests put a ChaosProxy in front of a real
// listener and let it do what busy hosts and NICs do to short-lived connections
// and byte streams: hand connections to the listener in a different order than
// they were made, hold new connections back, cut streams into tiny pieces, delay
// and stall them. Bytes of one stream are never lost, duplicated or reordered —
// TCP's own guarantee stays intact, everything else is up for grabs.
//
// Everything random comes from `seed`: a connection's hold time and the way its
// two directions are cut and delayed depend only on (seed, connection number),
// a batch's shuffle only on (seed, batch number).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

namespace tether::chaos {

// Inclusive range; max == 0 switches the behaviour off.
struct Range {
  std::uint32_t min = 0;
  std::uint32_t max = 0;
  bool enabled() const { return max > 0; }
};

struct ChaosOptions {
  std::uint64_t seed = 1;

  // Accepted connections are pooled until `shuffleBatch` are waiting or
  // `shuffleWindowMs` passed since the first, then connected to the target one
  // after another in a seeded random order: accept order at the target differs
  // from connect order at the clients.
  bool shuffleAccepts = false;
  std::uint32_t shuffleWindowMs = 10;
  std::uint32_t shuffleBatch = 16;

  // Each new connection waits a random time before it is connected upstream.
  Range holdNewConnMs;
  // Forward each direction in pieces of a random size (bytes); {1,1} = byte by byte.
  Range fragmentBytes;
  // Wait a random time before forwarding each piece.
  Range delayPiecesUs;
  // Before a piece, with this probability, stop the stream for a random time.
  double stallProbability = 0.0;
  Range stallMs;
};

struct ChaosStats {
  std::uint64_t accepted = 0;           // client connections accepted
  std::uint64_t connectedUpstream = 0;  // connections opened to the target
  std::uint64_t failedUpstream = 0;     // target refused or unreachable
  std::uint64_t held = 0;               // connections that were held back
  std::uint64_t batches = 0;            // shuffle batches released
  std::uint64_t reorderedBatches = 0;   // batches released in a different order
  std::uint64_t pieces = 0;             // writes made to either side
  std::uint64_t bytes = 0;              // bytes forwarded, both directions
  std::uint64_t delayedPieces = 0;
  std::uint64_t stalls = 0;
};

// "host:port" or "[v6]:port" -> (host, port). Throws std::invalid_argument.
std::pair<std::string, std::uint16_t> splitHostPort(const std::string& hostPort);

class ChaosProxy {
 public:
  explicit ChaosProxy(ChaosOptions options = {});
  ~ChaosProxy();  // stops
  ChaosProxy(const ChaosProxy&) = delete;
  ChaosProxy& operator=(const ChaosProxy&) = delete;

  // Binds `listen` ("127.0.0.1:0" picks a free port) and starts the proxy's
  // thread. An empty `target` parks new connections until setTarget().
  void start(const std::string& target, const std::string& listen = "127.0.0.1:0");
  // Thread-safe; releases parked connections.
  void setTarget(const std::string& target);
  // Closes the listener, lets bytes the proxy already holds reach their
  // receivers (as the network would after a sender exits) for up to `drain`,
  // then closes every connection and joins the thread. Idempotent.
  void stop(std::chrono::milliseconds drain = std::chrono::milliseconds(2000));

  // The address clients should connect to, "host:port" (valid after start).
  std::string endpoint() const;
  std::uint16_t port() const;
  ChaosStats stats() const;
  const ChaosOptions& options() const;

  struct State;  // chaos_proxy.cpp; keeps Asio out of this header

 private:
  std::shared_ptr<State> state_;
};

}  // namespace tether::chaos
