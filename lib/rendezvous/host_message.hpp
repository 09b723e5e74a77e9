// The messages of the host-local streams (host_group_leader.cpp,
// host_group_member.cpp): u32 length (of what follows, little endian), u8
// type, payload. Payloads are the
// handshake's and the rendezvous' encodings (wire/handshake.hpp); Fail (the
// leader's, to its members) and Leave (a member's, to its leader: it ends its
// rendezvous for a cause of its own, its deadline, before the table) are a
// Cause: u8 ErrorCode, i32 peer (little endian; -1: none) + text; Full
// (empty) is a full group's answer before the challenge: try the next group.
// docs/scale.md, "Host-local aggregation".
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/system/system_error.hpp>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/layer.hpp"
#include "link/stream.hpp"
#include "tether/error.hpp"

TETHER_LAYER(4, "rendezvous");

namespace tether::rdv::host {

enum class Msg : std::uint8_t { Challenge = 1, Hello, Welcome, Reject, Register, Table, Fail, Full, Leave };
using Bytes = std::vector<unsigned char>;

// Why a rendezvous ended, as Fail and Leave carry it: the code, the peer it
// names (a receiver reports that peer, not the sender), the text.
struct Cause {
  ErrorCode code = ErrorCode::Aborted;
  int peer = -1;
  std::string text;
};
Bytes encodeCause(const Cause& c);
// Throws std::invalid_argument when shorter than code and peer, or for an unknown code.
Cause decodeCause(const Bytes& b);

// `written`: its first bytes went already (writeNow's).
boost::asio::awaitable<void> writeMsg(link::Stream& s, Msg type, const Bytes& payload, std::size_t written = 0);
// Writes what fits now of one message, without waiting; the bytes written
// (all of it: 5 + payload.size()).
std::size_t writeNow(link::Stream& s, Msg type, const Bytes& payload);
// Throws std::invalid_argument for a length of 0 or over 1 GiB.
boost::asio::awaitable<std::pair<Msg, Bytes>> readMsg(link::Stream& s);
// "it closed the connection" for EOF, else the error's message.
std::string reasonOf(const boost::system::system_error& e);

}  // namespace tether::rdv::host
