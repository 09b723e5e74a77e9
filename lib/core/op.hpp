// One call in flight (a collective, a send or a receive): what it waits for
// and how it ends. Lives on the progress thread; the calling thread only holds
// a reference for cancellation.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/layer.hpp"
#include "core/sequence.hpp"
#include "link/sink.hpp"
#include "match/key.hpp"
#include "tether/detail/core/call_table.hpp"
#include "tether/detail/core/collective_calls.hpp"
#include "tether/detail/core/deadline_queue.hpp"
#include "tether/detail/core/rank_names.hpp"
#include "wire/frame.hpp"

TETHER_LAYER(6, "core");

namespace tether {

struct CommCounters;  // observe.hpp
// An operation's run (OpRun: a collective, a send or a receive): resumed,
// with the op's error or nullptr, once the wait it began has ended.
using detail::core::Resumable;

class Op : public link::Owner, public detail::core::CallState<match::Key> {
 public:
  enum class Kind { Collective, Send, Recv };
  using Clock = std::chrono::steady_clock;

  // A collective: `code` is its wire::OpCode, `coll` its collective id;
  // `child`: not the world communicator (errors then name the communicator).
  Op(std::uint64_t comm, std::uint64_t coll, std::uint32_t code, bool child)
      : comm(comm), coll(coll), code(code), kind_(Kind::Collective), child_(child) {}
  // Point-to-point: `peer` and `tag` as the caller gave them.
  Op(Kind kind, std::uint64_t comm, int peer, int tag)
      : comm(comm), coll(0), code(0), kind_(kind), peer_(peer), tag_(tag) {}

  // "allgather#12", "barrier#1 (comm 5d2e9a01)", "recv from rank 3 tag 7": how
  // errors name the operation. Built on demand (only errors and logs need it).
  std::string name() const;
  Kind kind() const { return kind_; }

  // How its errors name ranks: its communicator's RankNames, set before it
  // starts. Frames and links number ranks by world rank; errors, rank() and
  // peer() by the communicator's (tether/detail/core/rank_names.hpp).
  std::shared_ptr<const detail::core::RankNames> names;
  // This rank: "rank 3", "rank 1 (world 3)"; and its communicator rank.
  std::string who() const { return names->who(); }
  int rank() const { return names->rank(); }
  // World rank `worldRank` in the communicator (Error::peer()), and its
  // name (`more`, its address, inside the parentheses).
  int peerOf(int worldRank) const { return names->rankOf(worldRank); }
  std::string nameOf(int worldRank, const std::string& more = std::string()) const {
    return names->nameOfWorld(worldRank, more);
  }

  // A finished collective's op, ready for the next call of its communicator
  // (its memory kept): collective `coll` of wire::OpCode `code`.
  void restart(std::uint64_t nextColl, std::uint32_t nextCode) {
    clear();
    coll = nextColl;
    code = nextCode;
  }
  // A finished point-to-point op, ready for the next send or receive (`kind`)
  // of its communicator.
  void restart(Kind kind, int peer, int tag) {
    clear();
    kind_ = kind;
    peer_ = peer;
    tag_ = tag;
  }

  const std::uint64_t comm;
  std::uint64_t coll;  // 0 for point-to-point
  std::uint32_t code;  // wire::OpCode of a collective, 0 for point-to-point
  // A broadcast's root as its frames carry it (wire::kNoRoot for any other
  // call); set before its run starts.
  std::uint32_t root = wire::kNoRoot;

  // When the call started (Calls::startRun; set before the progress thread sees the op).
  std::chrono::steady_clock::time_point began{};

  // Progress-thread state: CallState's (what it has outstanding, its
  // error, its run, its receives posted; tether/detail/core/call_table.hpp) and:
  // A collective's group as world ranks (empty for point-to-point): losing any
  // of them fails the collective even when it is not waiting on that rank
  // right now, because the collective can no longer complete everywhere.
  std::vector<int> members;
  std::shared_ptr<CollectiveSeq> seq;  // a collective's communicator sequence
  std::shared_ptr<CommCounters> counters;  // its communicator's (frames, how it ended)
  // A collective's communicator's broken record (a subset barrier's: its
  // parent's), marked when the collective fails, waited for or not.
  std::shared_ptr<detail::core::BrokenRecord> broken;
  // A failed op whose frame a link is writing from (or reading into) its
  // buffer right now: the call returns only once that transfer ends, so the
  // link need not cut the stream mid-frame (which the peer would take for
  // this rank's death) and the caller's buffer is never used after return.
  int draining = 0;
  std::function<void()> afterDrain;
  // A request's deadline (RequestDeadlines), set before its run starts
  // (zero: none; a blocking call's caller waits with its deadline), the
  // op's place among the others, and its owner while it runs there (reset
  // when it ends, so that the lease can end).
  Clock::time_point expires{};
  detail::core::DeadlineHook<Op> deadlineHook;
  std::weak_ptr<Op> self;

 private:
  void clear() {
    clearState();
    draining = 0;
    afterDrain = nullptr;
    expires = {};
    self.reset();
  }

  Kind kind_;
  const bool child_ = false;
  int peer_ = -1, tag_ = -1;
};

}  // namespace tether
