// Words for a hello the root refused, shared by the rendezvous implementations.
#pragma once
#include "base/layer.hpp"
#include "wire/handshake.hpp"

TETHER_LAYER(4, "rendezvous");

namespace tether::rdv {

inline const char* refusalText(wire::RejectCode code) {
  switch (code) {
    case wire::RejectCode::BadProof:
      return "wrong secret (it holds another job's UniqueId?)";
    case wire::RejectCode::WrongWorld:
      return "wrong world size";
    default:
      return "refused";
  }
}

}  // namespace tether::rdv
