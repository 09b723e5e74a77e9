// What a legitimate rank knows (the UniqueId's secret, the world id and
// size), for raw clients that pass a listener's handshake as a rank would.
#pragma once

#include <chrono>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "base/crypto.hpp"
#include "core/unique_id_layout.hpp"
#include "raw_client.hpp"
#include "tether/unique_id.hpp"
#include "wire/handshake.hpp"

namespace tether::fault {

struct Member {
  wire::Secret secret;
  std::uint64_t world;
  int nranks;
};

inline Member memberOf(const UniqueId& id, int nranks) {
  auto f = uid::parse(id);
  return {
      f.secret,
      crypto::hash64("tether-world", std::string_view(reinterpret_cast<const char*>(f.secret.data()), f.secret.size())),
      nranks};
}

// A hello frame answering `challengePayload`, claiming `rank`, proved with `secret`.
inline std::vector<unsigned char> helloFor(const std::vector<unsigned char>& challengePayload, const Member& m,
                                           int rank, const wire::Secret& secret) {
  auto c = wire::decodeChallenge(challengePayload);
  wire::Hello h;
  h.rank = static_cast<std::uint32_t>(rank);
  h.nranks = static_cast<std::uint32_t>(m.nranks);
  h.world = m.world;
  crypto::randomBytes(h.nonce.data(), h.nonce.size());
  h.proof = wire::helloProof(secret, c, h);
  return wire::encode(h);
}

// Reads the listener's challenge (every accepted connection starts with one).
inline std::vector<unsigned char> challenge(RawClient& c) {
  using namespace std::chrono_literals;
  auto f = c.readFrame(3s);
  if (!f || f->first.kind != wire::Kind::Challenge) throw std::runtime_error("no challenge from the listener");
  return f->second;
}

}  // namespace tether::fault
