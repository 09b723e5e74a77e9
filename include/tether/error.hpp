// tether/error.hpp — the one exception type every tether call throws.
//
// Usable from C++17. Every message names the rank that raised it, the peer
// involved (if any) and the operation, e.g.
//   "rank 3: allgather#12 step 1 from peer 5: peer lost (connection reset)".
#pragma once

#include <stdexcept>
#include <string>

namespace tether {

enum class ErrorCode {
  Timeout,          // a deadline passed before the operation completed
  Aborted,          // abort() was called on this rank or a peer sent an abort notice
  PeerLost,         // a peer's connection closed or it stopped answering
  Protocol,         // a peer sent something that breaks the wire contract
  InvalidArgument,  // the caller passed something unusable
  System,           // the operating system refused (socket, bind, fds, ...)
};

// Inline, so header-only users (the testing world, the adapters) need no library symbol.
inline const char* toString(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::Timeout:
      return "Timeout";
    case ErrorCode::Aborted:
      return "Aborted";
    case ErrorCode::PeerLost:
      return "PeerLost";
    case ErrorCode::Protocol:
      return "Protocol";
    case ErrorCode::InvalidArgument:
      return "InvalidArgument";
    case ErrorCode::System:
      return "System";
  }
  return "Unknown";
}

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message, int rank = -1, int peer = -1)
      : std::runtime_error(message), code_(code), rank_(rank), peer_(peer) {}

  ErrorCode code() const noexcept { return code_; }
  // The rank that raised the error, or -1 when it is not known yet (before rendezvous).
  int rank() const noexcept { return rank_; }
  // The peer the error is about (the lost rank, the aborting rank, ...), or -1.
  int peer() const noexcept { return peer_; }

 private:
  ErrorCode code_;
  int rank_;
  int peer_;
};

}  // namespace tether
