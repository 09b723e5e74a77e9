#include "collectives/context.hpp"

namespace tether::coll {

void Context::send(int peer, std::uint32_t step, const void* data, std::size_t bytes) {
  wire::FrameHeader h;
  h.kind = wire::Kind::Collective;
  h.comm = group_.comm;
  h.coll = op_.coll;
  h.step = step;
  h.tag = op_.code;
  h.length = bytes;
  world_.sendFrame(op_, group_.worldRanks[peer], h, data, /*reference=*/true);
}

void Context::recv(int peer, std::uint32_t step, void* data, std::size_t bytes) {
  match::Key k{static_cast<std::uint32_t>(group_.worldRanks[peer]), group_.comm, wire::Kind::Collective, op_.coll,
               step, op_.code};
  world_.postRecv(op_, k, data, bytes);
}

}  // namespace tether::coll
