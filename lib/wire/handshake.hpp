// Handshake and rendezvous payloads. A link comes up in three frames:
//   acceptor -> dialer  Challenge {acceptor rank, nonceA}
//   dialer -> acceptor  Hello     {dialer rank, nranks, world id, nonceD, proof}
//   acceptor -> dialer  Welcome   {proof'}            or Reject {code, reason}
// proof  = HMAC-SHA256(secret, "tether-hello"   | nonceA | nonceD | ranks | nranks | world)
// proof' = HMAC-SHA256(secret, "tether-welcome" | nonceD | nonceA | ranks | nranks | world)
// The secret never crosses the wire; fresh nonces on both sides make a replayed
// handshake fail. docs/wire-protocol.md and docs/security.md.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/crypto.hpp"
#include "base/peer_address.hpp"
#include "base/layer.hpp"

TETHER_LAYER(1, "wire");

namespace tether::wire {

using Nonce = std::array<unsigned char, 16>;
using Secret = std::array<unsigned char, 16>;

// The rank an observer (tether-status, docs/troubleshooting.md) claims in its
// hello: it proves the secret like a rank, names the world (nranks 0: it does
// not know the size) and is never a link: it asks, is answered, and closes.
inline constexpr std::uint32_t kObserverRank = 0xfffffffeu;

struct Challenge {
  std::uint32_t rank = 0;  // acceptor's world rank
  Nonce nonce{};
};

struct Hello {
  std::uint32_t rank = 0;  // dialer's world rank
  std::uint32_t nranks = 0;
  std::uint64_t world = 0;  // world communicator id
  std::uint32_t epoch = 0;  // connections to the acceptor the dialer has set aside (docs/ordering.md, R5)
  Nonce nonce{};
  crypto::Digest proof{};
};

struct Welcome {
  crypto::Digest proof{};
};

enum class RejectCode : std::uint16_t {
  BadProof = 1,       // wrong secret
  WrongWorld = 2,     // different world id or world size
  DuplicateRank = 3,  // that rank is already connected
  Simultaneous = 4,   // both sides dialled; the lower rank's dial wins
  BadRank = 5,        // rank out of range
  ShuttingDown = 6,
  Stale = 7,  // the hello was dialled before a close this side has completed (R5)
  NotJoined = 8,  // an observer asked for the address table before the world had it
  Retry = 9,      // the hello waited for the dialer's previous connection past the deadline (R4): dial again
};

// A Goodbye says whether the sender leaves (its bootstrap closes) or only
// closes this connection (the link budget); only a final one makes it gone.
enum class GoodbyeMode : std::uint8_t { Final = 0, Idle = 1 };
std::vector<unsigned char> encodeGoodbye(GoodbyeMode mode);
// Throws std::invalid_argument on anything but one valid byte.
GoodbyeMode decodeGoodbye(const std::vector<unsigned char>& b);

struct Reject {
  RejectCode code{};
  std::string reason;
};

struct Register {
  std::uint32_t rank = 0;
  PeerAddress address;
};

std::vector<unsigned char> encode(const Challenge& m);
std::vector<unsigned char> encode(const Hello& m);
std::vector<unsigned char> encode(const Welcome& m);
std::vector<unsigned char> encode(const Reject& m);
std::vector<unsigned char> encode(const Register& m);
std::vector<unsigned char> encodeTable(const std::vector<PeerAddress>& table);

// Decoders throw std::out_of_range / std::invalid_argument on malformed input.
Challenge decodeChallenge(const std::vector<unsigned char>& b);
Hello decodeHello(const std::vector<unsigned char>& b);
Welcome decodeWelcome(const std::vector<unsigned char>& b);
Reject decodeReject(const std::vector<unsigned char>& b);
Register decodeRegister(const std::vector<unsigned char>& b);
std::vector<PeerAddress> decodeTable(const std::vector<unsigned char>& b, std::uint32_t nranks);

using Bytes = std::vector<unsigned char>;
using SharedBytes = std::shared_ptr<const Bytes>;

// Bytes of one PeerAddress in a Register or Table message.
inline constexpr std::size_t kAddressBytes = 1 + 16 + 2 + 8 + 2 + 8;

// Every rank's address as a Table message carries it: kept encoded (and
// shared, not copied, when it is forwarded) and decoded one entry at a time,
// so a world of N ranks costs each rank one N-entry buffer.
class AddressTable {
 public:
  AddressTable() = default;
  // Checks the count and every entry; throws std::invalid_argument or
  // std::out_of_range on a malformed table.
  AddressTable(SharedBytes encoded, std::uint32_t nranks);
  explicit AddressTable(const std::vector<PeerAddress>& table);
  std::uint32_t size() const { return n_; }
  PeerAddress at(std::uint32_t rank) const;
  const SharedBytes& encoded() const { return bytes_; }

 private:
  SharedBytes bytes_;
  std::uint32_t n_ = 0;
};

crypto::Digest helloProof(const Secret& secret, const Challenge& c, const Hello& h);
crypto::Digest welcomeProof(const Secret& secret, const Challenge& c, const Hello& h);

}  // namespace tether::wire
