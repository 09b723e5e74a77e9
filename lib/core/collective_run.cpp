#include "core/collective_run.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "core/communicator.hpp"
#include "core/world.hpp"

namespace tether {

namespace dc = detail::coll;

namespace {

bool sameShape(const dc::Shape& a, const dc::Shape& b) {
  return a.rank == b.rank && a.size == b.size && a.cpuBound == b.cpuBound && a.radix == b.radix &&
         a.largeBytes == b.largeBytes && a.chunk == b.chunk;
}

}  // namespace

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
  const auto& steps = plan();  // sizes scratch_ first
  exec_.emplace(steps, in_, out_, scratch_.data());
}

const std::vector<dc::Step>& CollectiveRun::plan() {
  ++uses_;
  if (!call_.blocks.sendCounts)
    for (CachedPlan& c : plans_)
      if (c.plan && !c.call.blocks.sendCounts && c.algo == algo_ && sameShape(c.shape, shape_) &&
          c.call.op == call_.op && c.call.bytes == call_.bytes && c.call.root == call_.root) {
        c.lastUse = uses_;
        return c.plan->steps();
      }
  CachedPlan& c = *std::min_element(plans_.begin(), plans_.end(),
                                    [](const CachedPlan& a, const CachedPlan& b) { return a.lastUse < b.lastUse; });
  c.plan.reset();
  c.plan.emplace(dc::record(*algo_, shape_, call_));
  c.algo = algo_;
  c.shape = shape_;
  c.call = call_;
  c.lastUse = uses_;
  if (scratch_.size() < c.plan->scratchBytes()) scratch_.resize(c.plan->scratchBytes());
  return c.plan->steps();
}

// A frame larger than TETHER_MAX_PAYLOAD_BYTES (the largest a receiver
// accepts) goes in parts of at most that size, numbered in the tag
// (wire::collectiveTag); the receiver, which knows the size, posts the same
// parts. So a valid call never fails on the limit, whatever an algorithm
// combines into one frame.
std::uint64_t CollectiveRun::parts(std::size_t bytes) const {
  const std::uint64_t max = maxPayload_;
  const std::uint64_t parts = bytes <= max ? 1 : (bytes + max - 1) / max;
  if (parts > wire::kMaxParts)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("rank {}: {}: a frame of {} bytes needs {} parts of TETHER_MAX_PAYLOAD_BYTES={} (at "
                            "most {}); raise TETHER_MAX_PAYLOAD_BYTES",
                            g_->rank, op_->name(), bytes, parts, max, wire::kMaxParts),
                g_->rank);
  return parts;
}

void CollectiveRun::postSend(int peer, std::uint32_t step, const void* data, std::size_t bytes) {
  wire::FrameHeader h;
  h.kind = wire::Kind::Collective;
  h.comm = g_->comm;
  h.coll = op_->coll;
  h.step = step;
  h.root = rootOnWire();
  const auto* bytesAt = static_cast<const unsigned char*>(data);
  for (std::uint64_t part = 0, n = parts(bytes), offset = 0; part < n; ++part, offset += maxPayload_) {
    h.tag = wire::collectiveTag(op_->code, part);
    h.length = std::min<std::uint64_t>(maxPayload_, bytes - offset);
    calls_->sendFrame(*op_, g_->worldRanks[peer], h, bytesAt + offset, /*reference=*/true);
  }
}

void CollectiveRun::postRecv(int peer, std::uint32_t step, void* data, std::size_t bytes) {
  match::Key k{static_cast<std::uint32_t>(g_->worldRanks[peer]),
               g_->comm,
               wire::Kind::Collective,
               op_->coll,
               step,
               0,
               rootOnWire()};
  auto* bytesAt = static_cast<unsigned char*>(data);
  for (std::uint64_t part = 0, n = parts(bytes), offset = 0; part < n; ++part, offset += maxPayload_) {
    k.tag = wire::collectiveTag(op_->code, part);
    calls_->postRecv(*op_, k, bytesAt + offset,
                     static_cast<std::size_t>(std::min<std::uint64_t>(maxPayload_, bytes - offset)));
  }
}

}  // namespace tether
