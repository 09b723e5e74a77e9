// The world's side of its links, one job: which peer has a link, and what
// happens when one opens, says goodbye or goes down. Links open lazily (or by
// the rendezvous; admitted by LinkAdmission, admission.hpp), close with a
// lingering goodbye and reopen under the link budget by the rules of
// docs/ordering.md ("Closing and reopening a link", R1-R8, checked by the
// model in test/model/): the LinkTable holds the links and decides by those
// rules, Peers acts on what it decides (dials, re-dials, the budget's idle
// goodbye) and counts it. It is the links' LinkSink: link events and control
// frames are its own, data frames and the operations a lost peer ends go to
// the operations' side through PeerTraffic (Calls). It is the abort relay's
// NoticeLinks. Progress thread only.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/layer.hpp"
#include "core/abort_relay.hpp"
#include "core/await_watch.hpp"
#include "core/lifecycle.hpp"
#include "core/link_table.hpp"
#include "core/observe.hpp"
#include "core/op_table.hpp"
#include "core/sequence_guard.hpp"
#include "core/stall_probe.hpp"
#include "core/world_config.hpp"
#include "link/connector.hpp"
#include "link/link.hpp"
#include "rendezvous/rendezvous.hpp"
#include "tether/error.hpp"
#include "wire/notice.hpp"

TETHER_LAYER(6, "core");

namespace tether {

// What the links bring for the operations (Calls implements it).
class PeerTraffic {
 public:
  // link::LinkSink's data half: where a frame's payload goes, and its arrival.
  virtual link::Target onDataHeader(link::Link& link, const wire::FrameHeader& h, bool mayWait) = 0;
  virtual void onDataComplete(link::Link& link, const wire::FrameHeader& h, const link::Target& t,
                              std::vector<unsigned char>&& stashed) = 0;
  // `peer` returned credit for the data frames of kind `data` (Collective:
  // of communicator `comm`) it received: the sends waiting for it go.
  virtual void onCredit(int peer, wire::Kind data, std::uint64_t comm, std::uint64_t bytes) = 0;
  // Fails the ops that cannot complete now that `link` to `peer` closed:
  // those with frames still queued on it, and, if the peer is gone, those
  // waiting for it (or, unless it left in order, having it as a member).
  virtual void failOpsOfPeer(int peer, bool gone, bool graceful, link::Link& link) = 0;

 protected:
  ~PeerTraffic() = default;
};

class Peers final : public link::LinkSink, public NoticeLinks {
 public:
  // What Peers needs of the other units; held by reference.
  struct Parts {
    LinkTable& table;
    link::Connector& connector;
    const Lifecycle& life;
    OpTable& ops;
    const SequenceGuard& sequences;
    StallProbe& probe;
    AbortRelay& relay;
    LinkCounters& counters;
    PeerTraffic& traffic;
    AwaitWatch& awaitWatch;
  };
  // `aborted`: an abort notice came from rank `from` (World::abortOnProgress).
  Peers(const WorldConfig& cfg, Parts parts, std::function<void(const wire::AbortNotice&, int from)> aborted)
      : cfg_(cfg), p_(parts), aborted_(std::move(aborted)) {}
  // The rendezvous: every rank's address, frames and link losses while joining.
  void setRendezvous(rdv::Rendezvous& r) { rendezvous_ = &r; }
  // Closing began: each check tells `check` how many links are still open
  // (not counting those to aborted peers).
  void watchDrain(std::function<void(int open)> check) { drained_ = std::move(check); }

  // The current link to `peer`, opened (dialled) if there is none; null if
  // the peer is gone or leaving.
  std::shared_ptr<link::Link> linkFor(int peer);
  // AwaitWatch's check: dials `peer` if a receive still waits for it with no link.
  void dialIfStillAwaited(int peer);
  // Counts a dial to `peer` (a re-dial if it had a link before).
  void countDial(int peer);
  // Closes the least recently used idle link if the budget is reached.
  void enforceBudget();
  // To `peer` over its current link, dialling if needed; false if it is gone.
  bool sendControlTo(int peer, wire::Kind kind, const std::vector<unsigned char>& payload);
  // The same with a payload shared (a reused buffer, PayloadPool's).
  bool sendControlTo(int peer, wire::Kind kind, wire::SharedBytes payload);
  // Goodbye on every current link (close()); a link still dialling is failed
  // instead when `failDialing(peer)`.
  void sayGoodbye(const std::function<bool(int peer)>& failDialing);
  // Closing is done when every link has closed after its goodbye exchange
  // (watchDrain's check is told).
  void checkDrained();
  // Every link, current and lingering, fails with `reason`.
  void failAll(const std::string& reason);
  // Error{PeerLost} for `op`, naming `peer` (a world rank) and why it is gone.
  Error peerGoneError(int peer, const Op& op) const;
  // "rank 3 (10.0.0.7:41235)".
  std::string describeRank(int worldRank) const { return p_.table.describe(worldRank); }

  // NoticeLinks
  std::vector<int> openPeers() const override;
  void sendOpen(int peer, const std::vector<unsigned char>& payload) override;
  void sendDialling(int peer, const std::vector<unsigned char>& payload) override;
  bool departed(int peer) const override;

 private:
  // The current link to `peer` for a control frame (dialled if needed); null
  // if `peer` is this rank, out of range, gone, or told goodbye.
  std::shared_ptr<link::Link> controlLink(int peer);
  void dial(int peer);
  void sendControl(link::Link& link, wire::Kind kind, const std::vector<unsigned char>& payload);
  // A peer's stall probe asks where this rank is.
  void answerStatus(link::Link& link, const wire::StatusQuery& q);
  void goodbyeFinal(link::Link& link);

  // link::LinkSink
  link::Target onDataHeader(link::Link& link, const wire::FrameHeader& h, bool mayWait) override {
    return p_.traffic.onDataHeader(link, h, mayWait);
  }
  std::vector<unsigned char> stashBuffer(std::size_t length) override { return p_.ops.stashBuffer(length); }
  void onDataComplete(link::Link& link, const wire::FrameHeader& h, const link::Target& t,
                      std::vector<unsigned char>&& stashed) override {
    p_.traffic.onDataComplete(link, h, t, std::move(stashed));
  }
  void onControlFrame(link::Link& link, const wire::FrameHeader& h, std::vector<unsigned char>&& payload) override;
  void onLinkDown(link::Link& link, const std::string& reason, bool graceful) override;
  void onTransferDone(link::Owner& owner, bool abandoned) override {
    p_.ops.transferDone(static_cast<Op&>(owner), abandoned);
  }
  void onLinkIdle(link::Link& link) override;
  void onGoodbye(link::Link& link, wire::GoodbyeMode mode) override;

  const WorldConfig& cfg_;
  Parts p_;
  std::function<void(const wire::AbortNotice&, int)> aborted_;
  rdv::Rendezvous* rendezvous_ = nullptr;
  std::function<void(int)> drained_;  // set when closing begins
};

}  // namespace tether
