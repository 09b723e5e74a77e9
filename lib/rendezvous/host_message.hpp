// The messages of the host-local streams (host_group.cpp): u32 length (of
// what follows, little endian), u8 type, payload. Payloads are the
// handshake's and the rendezvous' encodings (wire/handshake.hpp); Fail is u8
// ErrorCode, i32 peer (little endian; -1: none) + text; Full (empty) is a
// full group's answer before the challenge: try the next group. docs/scale.md, "Host-local aggregation".
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/system/system_error.hpp>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/layer.hpp"
#include "link/stream.hpp"

TETHER_LAYER(4, "rendezvous");

namespace tether::rdv::host {

enum class Msg : std::uint8_t { Challenge = 1, Hello, Welcome, Reject, Register, Table, Fail, Full };
using Bytes = std::vector<unsigned char>;

boost::asio::awaitable<void> writeMsg(link::Stream& s, Msg type, const Bytes& payload);
// Writes what fits now of one message, without waiting; the bytes written
// (all of it: 5 + payload.size()).
std::size_t writeNow(link::Stream& s, Msg type, const Bytes& payload);
// Throws std::invalid_argument for a length of 0 or over 1 GiB.
boost::asio::awaitable<std::pair<Msg, Bytes>> readMsg(link::Stream& s);
// "it closed the connection" for EOF, else the error's message.
std::string reasonOf(const boost::system::system_error& e);

}  // namespace tether::rdv::host
