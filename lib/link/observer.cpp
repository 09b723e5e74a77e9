#include "link/observer.hpp"

#include <fmt/format.h>

#include <stdexcept>
#include <string>

#include "base/crypto.hpp"
#include "link/connector.hpp"
#include "link/frame_io.hpp"

namespace tether::link {

asio::awaitable<void> observerHandshake(Stream& s, const wire::Secret& secret, std::uint64_t worldId,
                                        std::uint32_t rank) {
  auto expectKind = [](const RawFrame& f, wire::Kind kind) {
    if (f.header.kind == wire::Kind::Reject) throw std::runtime_error(rejectText(wire::decodeReject(f.payload)));
    if (f.header.kind != kind)
      throw std::runtime_error(fmt::format("expected a {} frame, got {}", wire::kindName(kind),
                                           wire::kindName(f.header.kind)));
  };
  auto f = co_await readFrame(s, wire::kMaxControlPayload);
  expectKind(f, wire::Kind::Challenge);
  const auto challenge = wire::decodeChallenge(f.payload);
  if (challenge.rank != rank) throw std::runtime_error(fmt::format("the listener there is rank {}", challenge.rank));
  wire::Hello hello;
  hello.rank = wire::kObserverRank;
  hello.nranks = 0;
  hello.world = worldId;
  crypto::randomBytes(hello.nonce.data(), hello.nonce.size());
  hello.proof = wire::helloProof(secret, challenge, hello);
  co_await writeFrame(s, wire::Kind::Hello, wire::encode(hello));
  auto reply = co_await readFrame(s, wire::kMaxControlPayload);
  expectKind(reply, wire::Kind::Welcome);
  const auto welcome = wire::decodeWelcome(reply.payload);
  const auto expected = wire::welcomeProof(secret, challenge, hello);
  if (!crypto::equalConstantTime(expected.data(), welcome.proof.data(), expected.size()))
    throw std::runtime_error("the listener could not prove the secret (not a member of this job)");
}

}  // namespace tether::link
