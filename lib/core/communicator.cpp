// Communicators: point-to-point calls, collectives (choose an algorithm,
// replay its plan over this world), subset barriers and split.
#include "core/communicator.hpp"

#include "base/env.hpp"
#include "coll/select.hpp"
#include "core/request_impl.hpp"
#include "tether/detail/args.hpp"
#include "tether/detail/core/deadlines.hpp"

namespace tether {

namespace dc = detail::coll;

Communicator::Communicator(std::shared_ptr<World> world)
    : world_(std::move(world)),
      timeoutMs_(world_->config().timeout.count()),
      names_(std::make_shared<const detail::core::RankNames>(world_->rank())) {
  group_ = Group::world(world_->config().worldId, world_->rank(), world_->nranks());
  learnNodes();
  counters_ = seq_->counters = std::make_shared<CommCounters>();
  world_->addCommunicator(group_.comm, seq_);
}

Communicator::Communicator(std::shared_ptr<World> world, Group group, std::chrono::milliseconds timeout,
                           std::shared_ptr<CommCounters> counters, std::shared_ptr<const detail::core::RankNames> names)
    : world_(std::move(world)),
      group_(std::move(group)),
      timeoutMs_(timeout.count()),
      names_(std::move(names)),
      counters_(std::move(counters)) {
  learnNodes();
  seq_->counters = counters_;
  world_->addCommunicator(group_.comm, seq_);
}

// This communicator's nodes (tether/detail/core/nodes.hpp), from the hosts
// the ranks advertised.
void Communicator::learnNodes() {
  const auto& nodeOf = world_->topology().nodeOf;
  nodes_ = detail::core::nodeView(size(), rank(), [&](int r) { return nodeOf[group_.worldRankOf(r)]; });
}

Communicator::~Communicator() { world_->removeCommunicator(group_.comm); }

void Communicator::setTimeout(std::chrono::milliseconds t) {
  timeoutMs_ = detail::core::communicatorTimeout(rank(), t, [] { return env::defaultTimeout(); }).count();
}

World::Clock::time_point Communicator::deadline() const { return detail::core::deadlineAfter(timeout()); }

// A point-to-point call's op and completion: the kept pair of `kept`, with
// the kept `run`, once nothing else holds them (an earlier call's request or
// stall probe may), or a pair and run of its own.
Communicator::PointCall Communicator::leasePoint(ReusedCall& kept, const std::shared_ptr<OpRun>& run, Op::Kind kind,
                                                 int peer, int tag, Op::Clock::time_point expires) {
  PointCall c;
  if (auto lease = kept.lease(kind, group_.comm, peer, tag)) {
    c.op = std::move(lease->op);
    c.done = std::move(lease->done);
    c.run = run;  // its last call ended before its op was let go
  } else {
    c.op = std::make_shared<Op>(kind, group_.comm, peer, tag);
    c.done = std::make_shared<Completion>();
    c.run = std::make_shared<OpRun>();
  }
  c.op->counters = counters_;
  c.op->names = names_;
  if (expires != Op::Clock::time_point{}) {
    c.op->expires = expires;
    c.op->self = c.op;
  }
  counters_->call(kind == Op::Kind::Send ? CommCounters::kSend : CommCounters::kRecv);
  return c;
}

Communicator::PointCall Communicator::launchSend(const void* data, std::size_t bytes, int peer, int tag,
                                                 Op::Clock::time_point expires) {
  PointCall c = leasePoint(*sendCall_, sendRun_, Op::Kind::Send, peer, tag, expires);
  c.run->startSend(world_->calls(), c.op, c.done, group_.worldRankOf(peer),
                   TcpCalls::sendFrame(group_.comm, tag, bytes), data);
  return c;
}

Communicator::PointCall Communicator::launchRecv(void* data, std::size_t bytes, int peer, int tag,
                                                 Op::Clock::time_point expires) {
  PointCall c = leasePoint(*recvCall_, recvRun_, Op::Kind::Recv, peer, tag, expires);
  c.run->startRecv(world_->calls(), c.op, c.done, TcpCalls::sendKey(group_.worldRankOf(peer), group_.comm, tag), data,
                   bytes);
  return c;
}

void Communicator::send(const void* data, std::size_t bytes, int peer, int tag) {
  PointCall c = launchSend(data, bytes, peer, tag);
  world_->calls().wait(c.op, *c.done, deadline());
}

void Communicator::recv(void* data, std::size_t bytes, int peer, int tag) {
  PointCall c = launchRecv(data, bytes, peer, tag);
  world_->calls().wait(c.op, *c.done, deadline());
}

std::unique_ptr<Request::Impl> Communicator::startSend(const void* data, std::size_t bytes, int peer, int tag) {
  const auto until = deadline();
  PointCall c = launchSend(data, bytes, peer, tag, until);
  return makeRequest(shared_from_this(), c.op, c.done, {}, until);
}

std::unique_ptr<Request::Impl> Communicator::startRecv(void* data, std::size_t bytes, int peer, int tag) {
  const auto until = deadline();
  PointCall c = launchRecv(data, bytes, peer, tag, until);
  return makeRequest(shared_from_this(), c.op, c.done, {}, until);
}

std::unique_ptr<Request::Impl> Communicator::startCollective(dc::Prepared call) {
  world_->checkProcess(dc::opName(call.call.op));  // before the locks: a forked child may find them held
  detail::CallSlot::Scope scope(calling_, rank(), dc::opName(call.call.op));
  const auto until = deadline();
  auto [op, done] = launchCollective(*this, call.call, call.in, call.out, until);
  return makeRequest(shared_from_this(), op, done, std::move(call.keep), until);
}

void Communicator::collective(dc::Prepared call) {
  world_->checkProcess(dc::opName(call.call.op));  // before the locks: a forked child may find them held
  detail::CallSlot::Scope scope(calling_, rank(), dc::opName(call.call.op));
  awaitCollective(launchCollective(*this, call.call, call.in, call.out));
}

std::pair<std::shared_ptr<Op>, std::shared_ptr<Completion>> Communicator::launchCollective(
    Communicator& on, dc::Call call, const void* in, void* out, Op::Clock::time_point expires) {
  checkSamePlans(world_->topology(), rank(), world_->config().maxPayload, dc::opName(call.op));
  const dc::Algorithm& algo = on.choice_.of(coll::settings, on.rank(), on.size(), world_->topology().cpuBound, call);
  // on's run is reused once its last call ended; its plan is recorded (or
  // found) before the call takes its id.
  if (!on.run_ || !on.run_->idle()) on.run_ = std::make_shared<OpRun>();
  on.run_->prepare(algo, on.choice_.shape, call, in, out);
  // The op and completion of on's last call are reused once nothing else
  // holds them (a request or a stall probe may).
  const auto code = static_cast<std::uint32_t>(call.op);
  const bool child = on.group_.comm != world_->config().worldId;
  const std::uint64_t coll = on.calls_.next();
  std::shared_ptr<Op> op;
  std::shared_ptr<Completion> done;
  if (auto kept = on.call_->lease(on.group_.comm, coll, code, child)) {
    op = std::move(kept->op);
    done = std::move(kept->done);
  } else {
    op = std::make_shared<Op>(on.group_.comm, coll, code, child);
    done = std::make_shared<Completion>();
  }
  if (calls_.broken()) calls_.usable(names_->who(), op->name(), rank());
  on.calls_.take();
  calling_.rename(dc::opName(call.op), coll, child ? on.group_.comm : 0);  // as op->name(), made only for an error
  // A kept op has these from its communicator's last call: not copied again
  // (no atomic reference counting, no copy of the group, per call).
  if (op->members.empty()) op->members.assign(on.group_.worldRanks.begin(), on.group_.worldRanks.end());
  if (op->seq != on.seq_) op->seq = on.seq_;
  if (op->counters != counters_) op->counters = counters_;
  if (op->names != on.names_) op->names = on.names_;
  if (op->broken != calls_.record()) op->broken = calls_.record();
  if (expires != Op::Clock::time_point{}) {
    op->expires = expires;
    op->self = op;
  }
  op->root = detail::core::rootOnWire(call);
  counters_->call(static_cast<std::size_t>(call.op));  // the kinds are wire::Op's values
  on.run_->startCollective(world_->calls(), on.group_.worldRanks, world_->config().maxPayload, op, done);
  return {std::move(op), std::move(done)};
}

void Communicator::awaitCollective(const std::pair<std::shared_ptr<Op>, std::shared_ptr<Completion>>& launched) {
  try {
    world_->calls().wait(launched.first, *launched.second, deadline());
  } catch (const Error& e) {
    calls_.markBroken(e.what());
    throw;
  }
}

void Communicator::subsetBarrier(const std::vector<int>& sorted) {
  world_->checkProcess("subset barrier");
  detail::CallSlot::Scope scope(calling_, rank(), "subset barrier");
  auto& sub = subsets_[sorted];
  if (!sub) sub.reset(new Communicator(world_, group_.subset(sorted), timeout(), counters_, names_));
  dc::Call call;
  call.op = dc::Op::SubsetBarrier;
  awaitCollective(launchCollective(*sub, call, nullptr, nullptr));
}

std::shared_ptr<Communicator> Communicator::split(int color, int key) {
  world_->checkProcess("split");
  std::vector<std::int32_t> pairs;
  dc::Prepared call = dc::splitCall(rank(), size(), color, key, Bootstrap::kNoColor, pairs);
  std::uint64_t splitId;
  {
    detail::CallSlot::Scope scope(calling_, rank(), "split");
    splitId = calls_.next();  // the id the split takes
    awaitCollective(launchCollective(*this, call.call, call.in, call.out));
  }
  if (color == Bootstrap::kNoColor) return nullptr;
  Group g = group_.child(splitId, color, pairs);
  auto names = std::make_shared<const detail::core::RankNames>(g.rank, g.worldRanks);
  return std::shared_ptr<Communicator>(
      new Communicator(world_, std::move(g), timeout(), std::make_shared<CommCounters>(), std::move(names)));
}

}  // namespace tether
