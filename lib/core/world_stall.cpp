// Timeouts: a call that passed its deadline fails with Timeout saying what it
// still waited for; a collective first finds out which rank is behind
// (StallProbe, docs/troubleshooting.md) and names it. And a peer's question
// about this rank is answered (statusOf, stall_probe.hpp) on its link.
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

void World::answerStatus(link::Link& link, const wire::StatusQuery& q) {
  const auto payload = wire::encode(statusOf(q, ops_, sequences_));
  if (!link.goodbyeSent())
    sendControl(link, wire::Kind::StatusAnswer, payload);
  else
    sendControlTo(link.peer(), wire::Kind::StatusAnswer, payload);
}

}  // namespace tether
