// The in-memory kind of stream (endpoint kind "mem", address a name), for
// tests: a connected pair of streams on one io_context, with no sockets and
// no threads. Reads can be cut into small pieces (1..maxChunk bytes, chosen
// by a seeded generator) and writes limited to a small buffer, so that
// partial reads and writes are exercised. A MemoryNetwork is a dialer and a
// registry of named listeners.
#pragma once

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "base/layer.hpp"
#include "link/stream.hpp"

TETHER_LAYER(3, "link");

namespace tether::link {

struct MemoryOptions {
  std::size_t maxChunk = 0;  // a read returns at most 1..maxChunk bytes (0: all there is)
  std::size_t capacity = 0;  // bytes in flight per direction before a writer waits (0: no limit)
  std::uint64_t seed = 1;    // of the chunk sizes
};

// Two connected streams: what one writes, the other reads. Each one's peer()
// is the other's name.
std::pair<std::shared_ptr<Stream>, std::shared_ptr<Stream>> memoryPair(asio::io_context& io, MemoryOptions options = {},
                                                                       std::string nameA = "mem:a",
                                                                       std::string nameB = "mem:b");

class MemoryNetwork final : public Dialer {
 public:
  explicit MemoryNetwork(asio::io_context& io, MemoryOptions options = {});
  MemoryNetwork(const MemoryNetwork&) = default;  // a copy dials and listens on the same network
  ~MemoryNetwork() override;
  // A listener at Endpoint{"mem", name}; throws std::invalid_argument when
  // the name is taken.
  std::shared_ptr<Listener> listen(const std::string& name);
  std::shared_ptr<Stream> open() override;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace tether::link
