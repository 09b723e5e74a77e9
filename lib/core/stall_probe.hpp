// Who is behind, when a collective times out (docs/troubleshooting.md, "A
// collective timed out"). Before the call fails, this rank asks the rank it
// waits on where that rank is in the same collective (a StatusQuery frame,
// wire/notice.hpp); a rank that runs it too says whom it waits on, and the
// probe asks that rank next, until it finds a rank that has not entered the
// collective, one that does not answer, or a cycle — all within a bounded
// time. The answer names ranks, never guesses: a rank is called "behind" only
// on its own word that it has not entered the collective. Progress thread.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/layer.hpp"
#include "core/op.hpp"
#include "wire/frame.hpp"
#include "wire/notice.hpp"

TETHER_LAYER(6, "core");

namespace tether {

class OpTable;
class SequenceGuard;

// The other side: this rank's answer to a StatusQuery, where it is in that
// collective (running it and waiting on whom, not entered, finished or given up).
wire::StatusAnswer statusOf(const wire::StatusQuery& q, const OpTable& ops, const SequenceGuard& sequences);

// What an observer's answer tells beyond the calls (tether-status).
struct RankFacts {
  int rank = 0, nranks = 0, linksOpen = 0;
  std::string lastError;
  std::chrono::steady_clock::time_point now{};
};
// An observer's question (comm and coll 0): this rank as a whole. Running
// with the call it is in (a collective first), whom it waits for and for how
// long; NotEntered when it is in no call.
wire::StatusAnswer statusOfRank(std::uint32_t id, const OpTable& ops, const RankFacts& facts);

class StallProbe {
 public:
  // Sends a control frame to `peer` (dialling if needed); false if it cannot.
  using Send = std::function<bool(int peer, wire::Kind kind, const std::vector<unsigned char>& payload)>;

  struct Finding {
    std::string text;  // "rank 3 has not entered barrier#7 (it is in allgather#6)"
    int behind = -1;   // the rank found behind (or not answering), if any
  };

  StallProbe(boost::asio::io_context& io, int rank, Send send) : io_(io), rank_(rank), send_(std::move(send)) {}

  // Follows the waits of collective `coll` of communicator `comm` (named
  // `collName` here) from `first`, the rank this rank waits on, for at most `budget`.
  // `names`: how the call's communicator names ranks (the chain is walked by world rank).
  boost::asio::awaitable<Finding> findBehind(std::uint64_t comm, std::uint64_t coll, std::string collName,
                                             std::shared_ptr<const detail::core::RankNames> names, int first,
                                             std::chrono::milliseconds budget);
  // A StatusAnswer from `peer` arrived.
  void onAnswer(int peer, const wire::StatusAnswer& a);
  // `op` passed its deadline: it fails with Timeout saying what it still
  // waited for; a collective first finds out who is behind (when `mayProbe`:
  // joined and not closing), for at most `budget`, and names that rank.
  void timeOut(const std::shared_ptr<Op>& op, OpTable& ops, bool mayProbe, std::chrono::milliseconds budget);

 private:
  struct Pending {
    int peer = -1;
    std::shared_ptr<boost::asio::steady_timer> timer;
    std::optional<wire::StatusAnswer> answer;
  };
  boost::asio::awaitable<void> probeThenFail(std::shared_ptr<Op> op, OpTable& ops, std::string what, int peer,
                                             std::chrono::milliseconds budget);

  boost::asio::io_context& io_;
  const int rank_;
  Send send_;
  std::uint32_t nextId_ = 1;
  std::unordered_map<std::uint32_t, Pending> pending_;
};

}  // namespace tether
