// A frame queued on a link: its encoded header and where its payload is.
#pragma once

#include <vector>

#include "base/layer.hpp"
#include "link/sink.hpp"
#include "wire/frame.hpp"

TETHER_LAYER(3, "link");

namespace tether::link {

struct OutFrame {
  wire::HeaderBytes header{};
  std::vector<unsigned char> owned;  // copied payload, or
  wire::SharedBytes shared;          // a payload shared with other frames (a table sent to many), or
  const void* ref = nullptr;         // the caller's payload (owner waits until written or copied)
  std::size_t len = 0;
  Owner* owner = nullptr;  // set only for referenced payloads
  bool abandoned = false;  // owner failed while this frame was being written
  bool ack = false;        // the GoodbyeAck: written means this side may close
};

// A control frame of `kind` with a copied payload, or a shared one.
OutFrame controlFrame(wire::Kind kind, const std::vector<unsigned char>& payload);
OutFrame controlFrame(wire::Kind kind, wire::SharedBytes payload);

}  // namespace tether::link
