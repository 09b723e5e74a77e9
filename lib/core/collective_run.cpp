#include "core/collective_run.hpp"

#include <algorithm>
#include <utility>

#include "core/communicator.hpp"
#include "core/world.hpp"

namespace tether {

namespace dc = detail::coll;

void CollectiveRun::start(World& w, const Group& g, std::shared_ptr<Op> op, std::shared_ptr<Completion> done,
                          const dc::Algorithm& algo, const dc::Shape& shape, const dc::Call& call, const void* in,
                          void* out) {
  maxPayload_ = std::max<std::uint64_t>(1, w.config().maxPayload);
  g_ = &g;
  algo_ = &algo;
  shape_ = shape;
  call_ = call;
  in_ = in;
  out_ = out;
  // The counts of an all-to-all(v) are read when the plan is recorded, on the
  // progress thread: kept here until then.
  if (call.blocks.sendCounts) {
    const auto n = static_cast<std::size_t>(g.size);
    sendCounts_.assign(call.blocks.sendCounts, call.blocks.sendCounts + n);
    sendDispls_.assign(call.blocks.sendDispls, call.blocks.sendDispls + n);
    recvCounts_.assign(call.blocks.recvCounts, call.blocks.recvCounts + n);
    recvDispls_.assign(call.blocks.recvDispls, call.blocks.recvDispls + n);
    call_.blocks = dc::Blocks{sendCounts_.data(), sendDispls_.data(), recvCounts_.data(), recvDispls_.data()};
  }
  op->root = rootOnWire();
  launch(w.calls(), std::move(op), std::move(done), shared_from_this());
}

void CollectiveRun::begin() {
  calls_->beginCollective(*op_->seq, *op_);
  const auto& steps = plans_.steps(*algo_, shape_, call_);  // sizes the scratch memory first
  exec_.emplace(steps, in_, out_, plans_.scratch());
}

void CollectiveRun::postSend(int peer, std::uint32_t step, const void* data, std::size_t bytes) {
  const auto* bytesAt = static_cast<const unsigned char*>(data);
  const TcpCalls::Parts parts = TcpCalls::partsOf(*op_, bytes, maxPayload_);
  for (std::uint64_t i = 0; i < parts.count; ++i)
    calls_->sendFrame(*op_, g_->worldRanks[peer], TcpCalls::collectiveFrame(*op_, step, i, parts.length(i)),
                      bytesAt + parts.offset(i), /*reference=*/true);
}

void CollectiveRun::postRecv(int peer, std::uint32_t step, void* data, std::size_t bytes) {
  auto* bytesAt = static_cast<unsigned char*>(data);
  const TcpCalls::Parts parts = TcpCalls::partsOf(*op_, bytes, maxPayload_);
  for (std::uint64_t i = 0; i < parts.count; ++i)
    calls_->postRecv(*op_, TcpCalls::collectiveKey(*op_, g_->worldRanks[peer], step, i), bytesAt + parts.offset(i),
                     static_cast<std::size_t>(parts.length(i)));
}

}  // namespace tether
