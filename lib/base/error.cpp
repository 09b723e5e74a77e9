#include "tether/error.hpp"

namespace tether {

const char* toString(ErrorCode code) noexcept {
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

}  // namespace tether
