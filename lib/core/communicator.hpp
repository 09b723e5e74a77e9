// One communicator — the world or a child from split() (or a subset of a
// barrier) — over a shared World. Everything a communicator has is here: its
// group, its timeout, the calling-thread state of its collectives (next id,
// whether an earlier one failed) and, shared with the progress thread, its
// collective sequence (sequence.hpp). TcpBootstrap forwards to it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/layer.hpp"
#include "core/op_run.hpp"
#include "core/reused_call.hpp"
#include "core/world.hpp"
#include "tether/detail/core/call_slot.hpp"
#include "tether/detail/coll/front.hpp"
#include "tether/detail/coll/settings.hpp"
#include "tether/detail/core/collective_calls.hpp"
#include "tether/detail/core/group.hpp"
#include "tether/detail/core/nodes.hpp"
#include "tether/request.hpp"

TETHER_LAYER(6, "core");

namespace tether {

// Its id, this rank's rank and each rank's world rank
// (tether/detail/core/group.hpp, as in the testing world).
using Group = detail::core::Group;

class Communicator : public std::enable_shared_from_this<Communicator> {
 public:
  // The world communicator of `world`.
  explicit Communicator(std::shared_ptr<World> world);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  const Group& group() const { return group_; }
  int rank() const { return group_.rank; }
  int size() const { return group_.size(); }
  int nranksPerNode() const { return nodes_.ranksPerNode; }
  int localRank() const { return nodes_.localRank; }
  int nodeId() const { return nodes_.nodeId; }
  int nnodes() const { return nodes_.nnodes; }
  // `peer`'s advertised address (a rank of this communicator).
  PeerAddress address(int peer) const { return world_->address(group_.worldRanks[peer]); }
  World& world() const { return *world_; }
  // This communicator's counters and its world's link counts (observe.hpp).
  Counters counters() const { return snapshot(*counters_, world_->linkCounters()); }
  std::chrono::milliseconds timeout() const { return std::chrono::milliseconds(timeoutMs_.load()); }
  void setTimeout(std::chrono::milliseconds t);

  void send(const void* data, std::size_t bytes, int peer, int tag);
  void recv(void* data, std::size_t bytes, int peer, int tag);
  // A collective over this communicator, built and checked by the caller
  // (tether/detail/coll/front.hpp).
  void collective(detail::coll::Prepared call);
  void subsetBarrier(const std::vector<int>& sortedRanks);
  // Nonblocking (requests.cpp): start the call, return its request, which
  // keeps the memory the call reads until it ends (in-place all-to-all's copy).
  std::unique_ptr<Request::Impl> startCollective(detail::coll::Prepared call);
  std::unique_ptr<Request::Impl> startSend(const void* data, std::size_t bytes, int peer, int tag);
  std::unique_ptr<Request::Impl> startRecv(void* data, std::size_t bytes, int peer, int tag);
  // Checks `color`; nullptr for kNoColor.
  std::shared_ptr<Communicator> split(int color, int key);

 private:
  // `counters`: a subset barrier's communicator counts into its parent's;
  // `names`: how its errors name ranks (a subset's: its parent's).
  Communicator(std::shared_ptr<World> world, Group group, std::chrono::milliseconds timeout,
               std::shared_ptr<CommCounters> counters, std::shared_ptr<const detail::core::RankNames> names);
  void learnNodes();
  // Takes the next collective id of `on` (this communicator or one of its
  // subsets) and starts the collective; the call slot is held.
  std::pair<std::shared_ptr<Op>, std::shared_ptr<Completion>> launchCollective(Communicator& on,
                                                                               detail::coll::Call call, const void* in,
                                                                               void* out,
                                                                               Op::Clock::time_point expires = {});
  // Waits for a blocking collective that launchCollective started on this
  // communicator or a subset (its op and completion); the call slot is held. A
  // failure leaves this communicator unusable.
  void awaitCollective(const std::pair<std::shared_ptr<Op>, std::shared_ptr<Completion>>& launched);
  World::Clock::time_point deadline() const;
  // A send's or a receive's op, completion and run (communicator.cpp).
  struct PointCall {
    std::shared_ptr<Op> op;
    std::shared_ptr<Completion> done;
    std::shared_ptr<OpRun> run;
  };
  // `expires`: a request's deadline (Op::expires), zero for a blocking call.
  PointCall leasePoint(ReusedCall& kept, const std::shared_ptr<OpRun>& run, Op::Kind kind, int peer, int tag,
                       Op::Clock::time_point expires);
  // Starts the send (receive); throws as Calls::startRun does.
  PointCall launchSend(const void* data, std::size_t bytes, int peer, int tag, Op::Clock::time_point expires = {});
  PointCall launchRecv(void* data, std::size_t bytes, int peer, int tag, Op::Clock::time_point expires = {});

  std::shared_ptr<World> world_;
  Group group_;
  detail::core::NodeView nodes_;  // from the hosts the ranks advertised
  std::atomic<std::int64_t> timeoutMs_;

  // One collective call at a time (tether/detail/core/call_slot.hpp): the
  // holder alone uses the state below (the slot's compare-and-swap orders
  // one holder's writes before the next holder's reads).
  detail::CallSlot calling_;
  // Ids of this communicator's collectives; the broken-communicator policy
  // (a subset's failure breaks its parent: only the parent's is checked).
  detail::core::CollectiveCalls calls_;
  std::map<std::vector<int>, std::shared_ptr<Communicator>> subsets_;
  // How its calls' errors name ranks: "rank 3"; on a child "rank 1 (world 3)".
  const std::shared_ptr<const detail::core::RankNames> names_;
  const std::shared_ptr<CollectiveSeq> seq_ = std::make_shared<CollectiveSeq>(*names_);
  std::shared_ptr<CommCounters> counters_;
  // The collective call's op and completion, and its run, reused by the next
  // call once nothing else holds them (launchCollective).
  ReusedCall::Kept call_ = ReusedCall::make();
  std::shared_ptr<OpRun> run_;
  // Its algorithm choice, kept for the next call of the same operation and
  // size (tether/detail/coll/settings.hpp).
  detail::coll::Choice choice_;
  // The same for blocking and nonblocking sends, and receives: one of each
  // kept (concurrent calls beyond that get their own).
  ReusedCall::Kept sendCall_ = ReusedCall::make(), recvCall_ = ReusedCall::make();
  const std::shared_ptr<OpRun> sendRun_ = std::make_shared<OpRun>(), recvRun_ = std::make_shared<OpRun>();
};

}  // namespace tether
