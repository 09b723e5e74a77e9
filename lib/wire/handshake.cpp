#include "wire/handshake.hpp"

#include <stdexcept>

#include "base/bytes.hpp"

namespace tether::wire {
namespace {

void putAddress(ByteWriter& w, const PeerAddress& a) {
  w.u8(a.family);
  w.bytes(a.addr.data(), a.addr.size());
  w.u16(a.port);
  w.u64(a.hostId);
  w.u16(a.cores);
  w.u64(a.plans);
}

PeerAddress getAddress(ByteReader& r) {
  PeerAddress a;
  a.family = r.u8();
  if (a.family != 4 && a.family != 6) throw std::invalid_argument("address family must be 4 or 6");
  r.bytes(a.addr.data(), a.addr.size());
  a.port = r.u16();
  if (a.port == 0) throw std::invalid_argument("address port is 0");
  a.hostId = r.u64();
  a.cores = r.u16();
  a.plans = r.u64();
  return a;
}

crypto::Digest proof(const Secret& secret, const char* label, const Nonce& first, const Nonce& second,
                     const Challenge& c, const Hello& h) {
  std::vector<unsigned char> msg;
  ByteWriter w(msg);
  w.str(label);
  w.bytes(first.data(), first.size());
  w.bytes(second.data(), second.size());
  w.u32(h.rank);
  w.u32(c.rank);
  w.u32(h.nranks);
  w.u64(h.world);
  w.u32(h.epoch);
  return crypto::hmacSha256(secret.data(), secret.size(), msg.data(), msg.size());
}

}  // namespace

std::vector<unsigned char> encode(const Challenge& m) {
  std::vector<unsigned char> b;
  ByteWriter w(b);
  w.u32(m.rank);
  w.bytes(m.nonce.data(), m.nonce.size());
  return b;
}

std::vector<unsigned char> encode(const Hello& m) {
  std::vector<unsigned char> b;
  ByteWriter w(b);
  w.u32(m.rank);
  w.u32(m.nranks);
  w.u64(m.world);
  w.u32(m.epoch);
  w.bytes(m.nonce.data(), m.nonce.size());
  w.bytes(m.proof.data(), m.proof.size());
  return b;
}

std::vector<unsigned char> encode(const Welcome& m) {
  return std::vector<unsigned char>(m.proof.begin(), m.proof.end());
}

std::vector<unsigned char> encode(const Reject& m) {
  std::vector<unsigned char> b;
  ByteWriter w(b);
  w.u16(static_cast<std::uint16_t>(m.code));
  w.str(m.reason);
  return b;
}

std::vector<unsigned char> encode(const Register& m) {
  std::vector<unsigned char> b;
  ByteWriter w(b);
  w.u32(m.rank);
  putAddress(w, m.address);
  return b;
}

std::vector<unsigned char> encodeTable(const std::vector<PeerAddress>& table) {
  std::vector<unsigned char> b;
  ByteWriter w(b);
  w.u32(static_cast<std::uint32_t>(table.size()));
  for (const auto& a : table) putAddress(w, a);
  return b;
}

Challenge decodeChallenge(const std::vector<unsigned char>& b) {
  ByteReader r(b.data(), b.size());
  Challenge m;
  m.rank = r.u32();
  r.bytes(m.nonce.data(), m.nonce.size());
  r.expectEnd("challenge");
  return m;
}

Hello decodeHello(const std::vector<unsigned char>& b) {
  ByteReader r(b.data(), b.size());
  Hello m;
  m.rank = r.u32();
  m.nranks = r.u32();
  m.world = r.u64();
  m.epoch = r.u32();
  r.bytes(m.nonce.data(), m.nonce.size());
  r.bytes(m.proof.data(), m.proof.size());
  r.expectEnd("hello");
  return m;
}

Welcome decodeWelcome(const std::vector<unsigned char>& b) {
  ByteReader r(b.data(), b.size());
  Welcome m;
  r.bytes(m.proof.data(), m.proof.size());
  r.expectEnd("welcome");
  return m;
}

Reject decodeReject(const std::vector<unsigned char>& b) {
  ByteReader r(b.data(), b.size());
  Reject m;
  m.code = static_cast<RejectCode>(r.u16());
  m.reason = r.str();
  r.expectEnd("reject");
  return m;
}

Register decodeRegister(const std::vector<unsigned char>& b) {
  ByteReader r(b.data(), b.size());
  Register m;
  m.rank = r.u32();
  m.address = getAddress(r);
  r.expectEnd("register");
  return m;
}

AddressTable::AddressTable(SharedBytes encoded, std::uint32_t nranks) : bytes_(std::move(encoded)) {
  ByteReader r(bytes_->data(), bytes_->size());
  n_ = r.u32();
  if (n_ != nranks)
    throw std::invalid_argument("table lists " + std::to_string(n_) + " ranks, expected " + std::to_string(nranks));
  if (r.remaining() != static_cast<std::size_t>(n_) * kAddressBytes)
    throw std::invalid_argument("table of " + std::to_string(n_) + " ranks has " + std::to_string(r.remaining()) +
                                " bytes of entries, expected " + std::to_string(std::size_t{n_} * kAddressBytes));
  for (std::uint32_t i = 0; i < n_; ++i) (void)getAddress(r);  // every entry checked once, here
}

AddressTable::AddressTable(const std::vector<PeerAddress>& table)
    : AddressTable(std::make_shared<const Bytes>(encodeTable(table)), static_cast<std::uint32_t>(table.size())) {}

PeerAddress AddressTable::at(std::uint32_t rank) const {
  if (rank >= n_) throw std::out_of_range("rank " + std::to_string(rank) + " is not in the table");
  ByteReader r(bytes_->data() + 4 + std::size_t{rank} * kAddressBytes, kAddressBytes);
  return getAddress(r);
}

std::vector<PeerAddress> decodeTable(const std::vector<unsigned char>& b, std::uint32_t nranks) {
  AddressTable t(std::make_shared<const Bytes>(b), nranks);
  std::vector<PeerAddress> table;
  table.reserve(t.size());
  for (std::uint32_t i = 0; i < t.size(); ++i) table.push_back(t.at(i));
  return table;
}

std::vector<unsigned char> encodeGoodbye(GoodbyeMode mode) { return {static_cast<unsigned char>(mode)}; }

GoodbyeMode decodeGoodbye(const std::vector<unsigned char>& b) {
  if (b.size() != 1 || b[0] > static_cast<unsigned char>(GoodbyeMode::Idle))
    throw std::invalid_argument("goodbye must carry one byte: 0 (final) or 1 (idle)");
  return static_cast<GoodbyeMode>(b[0]);
}

crypto::Digest helloProof(const Secret& secret, const Challenge& c, const Hello& h) {
  return proof(secret, "tether-hello", c.nonce, h.nonce, c, h);
}

crypto::Digest welcomeProof(const Secret& secret, const Challenge& c, const Hello& h) {
  return proof(secret, "tether-welcome", h.nonce, c.nonce, c, h);
}

}  // namespace tether::wire
