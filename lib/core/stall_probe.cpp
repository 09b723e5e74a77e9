#include "core/stall_probe.hpp"

#include <fmt/format.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <algorithm>

#include "core/op_table.hpp"
#include "core/sequence_guard.hpp"

#include "tether/detail/core/failures.hpp"

namespace tether {

namespace failures = detail::core::failures;

namespace asio = boost::asio;

namespace {
// How long to wait before asking a rank again that answered "running, waiting for nothing".
constexpr auto kAskAgain = std::chrono::milliseconds(20);
}  // namespace

asio::awaitable<StallProbe::Finding> StallProbe::findBehind(std::uint64_t comm, std::uint64_t coll,
                                                            std::string collName,
                                                            std::shared_ptr<const detail::core::RankNames> names,
                                                            int first, std::chrono::milliseconds budget) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  std::vector<int> chain;
  auto name = [&](int worldRank) { return names->nameOfWorld(worldRank); };
  auto via = [&] {
    if (chain.size() < 2) return std::string();
    std::string path = "this rank waits for " + name(chain.front());
    for (std::size_t i = 1; i < chain.size(); ++i) path += ", which waits for " + name(chain[i]);
    return " (" + path + ")";
  };
  for (int cur = first;;) {
    chain.push_back(cur);
    const std::uint32_t id = nextId_++;
    if (!send_(cur, wire::Kind::StatusQuery, wire::encode(wire::StatusQuery{id, comm, coll})))
      co_return Finding{fmt::format("{} is unreachable{}", name(cur), via()), cur};
    auto timer = std::make_shared<asio::steady_timer>(io_, deadline);
    pending_[id] = Pending{cur, timer, std::nullopt};
    boost::system::error_code ignored;
    co_await timer->async_wait(asio::redirect_error(asio::use_awaitable, ignored));
    auto answer = std::move(pending_[id].answer);
    pending_.erase(id);
    if (!answer)
      co_return Finding{fmt::format("{} did not answer where it is within {} ms (unreachable, or not making "
                                    "progress){}",
                                    name(cur), budget.count(), via()),
                        cur};
    switch (answer->state) {
      case wire::StallState::NotEntered:
        // Still in an earlier collective that waits for another rank: follow it.
        if (answer->waitsOn != wire::kNoRank && static_cast<int>(answer->waitsOn) != rank_ &&
            std::find(chain.begin(), chain.end(), static_cast<int>(answer->waitsOn)) == chain.end()) {
          cur = static_cast<int>(answer->waitsOn);
          continue;
        }
        co_return Finding{fmt::format("{} has not entered {} (it is {}){}", name(cur), collName, answer->doing, via()),
                          cur};
      case wire::StallState::NoComm:
        co_return Finding{fmt::format("{} has not entered {} (it has no such communicator: {}){}", name(cur), collName,
                                      answer->doing, via()),
                          cur};
      case wire::StallState::Finished:
        if (!answer->doing.empty())  // it failed there: its own error (maybe its own probe's finding)
          co_return Finding{fmt::format("{} gave up on it{}: {}", name(cur), via(), answer->doing),
                            answer->waitsOn == wire::kNoRank ? -1 : static_cast<int>(answer->waitsOn)};
        co_return Finding{fmt::format("{} has finished {}{}", name(cur), collName, via()), -1};
      case wire::StallState::Running:
        break;
    }
    const int next = answer->waitsOn == wire::kNoRank ? -1 : static_cast<int>(answer->waitsOn);
    if (next < 0) {
      // Between two steps (nothing posted, nothing queued): ask again shortly
      // while the budget lasts; a rank that is behind shows up as a wait.
      if (std::chrono::steady_clock::now() + kAskAgain < deadline) {
        chain.pop_back();
        asio::steady_timer pause(io_, kAskAgain);
        co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
        continue;
      }
      co_return Finding{fmt::format("{} is {}{}", name(cur), answer->doing, via()), -1};
    }
    if (next == rank_ || std::find(chain.begin(), chain.end(), next) != chain.end()) {
      chain.push_back(next);
      co_return Finding{fmt::format("no rank found behind: the ranks wait on each other in {}{}", collName, via()), -1};
    }
    cur = next;
  }
}

void StallProbe::onAnswer(int peer, const wire::StatusAnswer& a) {
  auto it = pending_.find(a.id);
  if (it == pending_.end() || it->second.peer != peer || it->second.answer) return;  // late, or not ours
  it->second.answer = a;
  it->second.timer->cancel();
}

void StallProbe::timeOut(const std::shared_ptr<Op>& op, OpTable& ops, bool mayProbe, std::chrono::milliseconds budget) {
  if (!op->active || op->error) return;
  std::string what = failures::failure(op->who(), op->name(), failures::timedOut(ops.pendingDescription(*op)));
  const int peer = ops.waitsOn(*op);
  if (op->kind() == Op::Kind::Collective && peer >= 0 && peer != rank_ && mayProbe) {
    asio::co_spawn(io_, probeThenFail(op, ops, std::move(what), peer, budget), asio::detached);
    return;
  }
  ops.failOp(*op, std::make_exception_ptr(Error(ErrorCode::Timeout, what, op->rank(), op->peerOf(peer))));
}

asio::awaitable<void> StallProbe::probeThenFail(std::shared_ptr<Op> op, OpTable& ops, std::string what, int peer,
                                                std::chrono::milliseconds budget) {
  auto found = co_await findBehind(op->comm, op->coll, op->name(), op->names, peer, budget);
  if (!op->active || op->error) co_return;  // it completed meanwhile, or an abort ended it
  ops.failOp(*op, std::make_exception_ptr(Error(ErrorCode::Timeout, what + "; " + found.text, op->rank(),
                                                op->peerOf(found.behind >= 0 ? found.behind : peer))));
}

wire::StatusAnswer statusOf(const wire::StatusQuery& q, const OpTable& ops, const SequenceGuard& sequences) {
  wire::StatusAnswer a;
  a.id = q.id;
  auto calls = [&] {
    std::string in;
    for (const Op* op : ops.activeSet()) {
      if (op->error) continue;
      in += (in.empty() ? "in " : ", ") + op->name();
    }
    return in.empty() ? std::string("not in a tether call") : in;
  };
  const CollectiveSeq* found = sequences.find(q.comm);
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
    const int w = ops.waitsOn(op);
    if (w >= 0) a.waitsOn = static_cast<std::uint32_t>(w);
    a.doing = fmt::format("in {}, {}", op.name(), ops.pendingDescription(op));
    return a;
  }
  a.state = q.coll > seq.started ? wire::StallState::NotEntered : wire::StallState::Finished;
  if (a.state == wire::StallState::NotEntered && !seq.running.empty()) {
    // Still in an earlier collective of that communicator: whom that one
    // waits for is who holds both up.
    const Op& op = *seq.running.begin()->second;
    const int w = ops.waitsOn(op);
    if (w >= 0) a.waitsOn = static_cast<std::uint32_t>(w);
    a.doing = fmt::format("in {}, {}", op.name(), ops.pendingDescription(op));
    return a;
  }
  if (a.state == wire::StallState::Finished && seq.failedColl == q.coll) {
    // It gave up on it (its own timeout, a loss): its error says why.
    a.doing = seq.failedWhat;
    if (seq.failedPeer >= 0) a.waitsOn = static_cast<std::uint32_t>(seq.failedPeer);
    return a;
  }
  a.doing = a.state == wire::StallState::Finished ? std::string() : calls();
  return a;
}

wire::StatusAnswer statusOfRank(std::uint32_t id, const OpTable& ops, const RankFacts& facts) {
  wire::StatusAnswer a;
  a.id = id;
  wire::RankDetail d;
  d.rank = static_cast<std::uint32_t>(facts.rank);
  d.nranks = static_cast<std::uint32_t>(facts.nranks);
  d.linksOpen = static_cast<std::uint32_t>(facts.linksOpen);
  d.lastError = facts.lastError;
  const Op* in = nullptr;  // the call to report: a collective if there is one, else the oldest
  std::string others;
  for (const Op* op : ops.activeSet()) {
    if (op->error) continue;
    const bool better = !in || (op->kind() == Op::Kind::Collective && in->kind() != Op::Kind::Collective) ||
                        (op->kind() == in->kind() && op->began < in->began);
    if (better) in = op;
  }
  if (!in) {
    a.state = wire::StallState::NotEntered;
    a.doing = "not in a tether call";
    a.detail = std::move(d);
    return a;
  }
  for (const Op* op : ops.activeSet())
    if (!op->error && op != in) others += (others.empty() ? "; also in " : ", ") + op->name();
  a.state = wire::StallState::Running;
  const int w = ops.waitsOn(*in);
  if (w >= 0) a.waitsOn = static_cast<std::uint32_t>(w);
  a.doing = fmt::format("in {}, {}{}", in->name(), ops.pendingDescription(*in), others);
  d.call = in->name();
  if (in->kind() == Op::Kind::Collective && !in->posted.empty())
    d.call += fmt::format(" step {}", in->posted.front().step);
  if (facts.now > in->began)
    d.inCallMs = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(facts.now - in->began).count());
  a.detail = std::move(d);
  return a;
}

}  // namespace tether
