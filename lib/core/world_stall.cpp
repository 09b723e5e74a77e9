// Timeouts: a call that passed its deadline fails with Timeout saying what it
// still waited for; a collective first finds out which rank is behind
// (StallProbe, docs/troubleshooting.md) and names it. And this rank's side of
// the probe: where it is in a collective a peer asks about.
#include <fmt/format.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <algorithm>

#include "core/world.hpp"

namespace tether {

void World::timeOut(const std::shared_ptr<Op>& op, std::chrono::milliseconds probeBudget) {
  if (!op->active || op->error) return;
  std::string what = fmt::format("rank {}: {}: timed out {}", rank(), op->name(), ops_.pendingDescription(*op));
  const int peer = ops_.waitsOn(*op);
  if (op->kind() == Op::Kind::Collective && peer >= 0 && peer != rank() && life_.joined() && !life_.closing()) {
    asio::co_spawn(io_, probeThenFail(op, std::move(what), peer, probeBudget), asio::detached);
    return;
  }
  ops_.failOp(*op, std::make_exception_ptr(Error(ErrorCode::Timeout, what, rank(), peer)));
}

asio::awaitable<void> World::probeThenFail(std::shared_ptr<Op> op, std::string what, int peer,
                                           std::chrono::milliseconds budget) {
  auto found = co_await probe_.findBehind(op->comm, op->coll, op->name(), peer, budget);
  if (!op->active || op->error) co_return;  // it completed meanwhile, or an abort ended it
  ops_.failOp(*op, std::make_exception_ptr(Error(ErrorCode::Timeout, what + "; " + found.text, rank(),
                                                 found.behind >= 0 ? found.behind : peer)));
}

wire::StatusAnswer World::statusOf(const wire::StatusQuery& q) const {
  wire::StatusAnswer a;
  a.id = q.id;
  auto calls = [&] {
    std::string in;
    for (const Op* op : ops_.activeSet()) {
      if (op->error) continue;
      in += (in.empty() ? "in " : ", ") + op->name();
    }
    return in.empty() ? std::string("not in a tether call") : in;
  };
  const CollectiveSeq* found = sequences_.find(q.comm);
  if (!found) {
    a.state = wire::StallState::NoComm;
    a.doing = calls();
    return a;
  }
  const CollectiveSeq& seq = *found;
  auto run = seq.running.find(q.coll);
  if (run != seq.running.end()) {
    a.state = wire::StallState::Running;
    const Op& op = *run->second;
    const int w = ops_.waitsOn(op);
    if (w >= 0) a.waitsOn = static_cast<std::uint32_t>(w);
    a.doing = fmt::format("in {}, {}", op.name(), ops_.pendingDescription(op));
    return a;
  }
  a.state = q.coll > seq.started ? wire::StallState::NotEntered : wire::StallState::Finished;
  if (a.state == wire::StallState::Finished && seq.failedColl == q.coll) {
    // It gave up on it (its own timeout, a loss): its error says why.
    a.doing = seq.failedWhat;
    if (seq.failedPeer >= 0) a.waitsOn = static_cast<std::uint32_t>(seq.failedPeer);
    return a;
  }
  a.doing = a.state == wire::StallState::Finished ? std::string() : calls();
  return a;
}

void World::answerStatus(link::Link& link, const wire::StatusQuery& q) {
  const auto payload = wire::encode(statusOf(q));
  if (!link.goodbyeSent())
    sendControl(link, wire::Kind::StatusAnswer, payload);
  else
    sendControlTo(link.peer(), wire::Kind::StatusAnswer, payload);
}

}  // namespace tether
