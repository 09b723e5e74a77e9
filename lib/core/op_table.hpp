// The operation table: the operations in flight on this world, the mailbox
// their receives wait in, and how they are posted, settle, wake and fail.
// Progress thread only.
#pragma once

#include <exception>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/layer.hpp"
#include "core/op.hpp"
#include "core/sequence_guard.hpp"
#include "core/stash_buffers.hpp"
#include "match/mailbox.hpp"
#include "wire/frame.hpp"

TETHER_LAYER(6, "core");

namespace tether {

// What the operation table needs from the links: the transfers of its
// operations (the link table implements it).
class TransferView {
 public:
  // Every link gives up `op`'s transfers; returns how many are still held
  // mid-frame (each ends with onTransferDone(abandoned)).
  virtual int abandonTransfers(Op& op) = 0;
  // Parked frames are read now (into the stash).
  virtual void unparkAll() = 0;
  // The peer some link still has `op`'s frames queued for (or its send
  // waits for, SendWindow); -1 if none.
  virtual int queuedFor(const Op& op) const = 0;
  // Why `op`'s send waits, when a send window holds it: ": it has not yet
  // received ... (TETHER_P2P_WINDOW_BYTES=...)"; "" otherwise.
  virtual std::string windowNote(const Op& op) const = 0;
  // A data frame `h` from `src` was received (into a receive or out of the
  // stash), or dropped: credit for its sender's window.
  virtual void frameReceived(int src, const wire::FrameHeader& h) = 0;
  // "rank 3 (10.0.0.7:41235)".
  virtual std::string describeRank(int rank) const = 0;

 protected:
  ~TransferView() = default;
};

class OpTable final : public OpFailer {
 public:
  OpTable(int rank, TransferView& links) : rank_(rank), links_(links) {}

  // ---- the registry ----
  void add(Op& op);
  void remove(Op& op);
  std::vector<Op*> active() const { return active_; }
  const std::vector<Op*>& activeSet() const { return active_; }
  // Some operation has a receive posted from `peer`.
  bool awaits(int peer) const;

  // ---- receiving ----
  // True if a frame already stashed under `key` completed the receive
  // (copied into `buf`); throws Protocol if its length differs.
  bool takeStashed(Op& op, const match::Key& key, void* buf, std::size_t len);
  void post(Op& op, const match::Key& key, void* buf, std::size_t len);
  struct Claim {
    Op* op;
    void* buf;
  };
  // Takes the oldest receive posted under the frame's key. Empty: there is
  // none. A null op: there was one, but the lengths differ (that op failed).
  std::optional<Claim> claim(int src, const wire::FrameHeader& h);
  // A complete frame from `src`: to the oldest receive posted under its key,
  // else into the stash. False: a collective frame with this key is already
  // stashed (a duplicate; dropped).
  bool deliver(int src, const wire::FrameHeader& h, const unsigned char* payload);
  bool deliver(int src, const wire::FrameHeader& h, std::vector<unsigned char>&& payload);
  // A claimed receive's payload is in place.
  void received(Op& op);
  // A referenced send of `op` was written, or (`abandoned`) a transfer it gave up on ended.
  void transferDone(Op& op, bool abandoned);
  match::Mailbox& mailbox() { return mailbox_; }
  // A buffer for a payload headed for the stash (LinkSink::stashBuffer): one
  // a receive has emptied, when one is kept.
  std::vector<unsigned char> stashBuffer(std::size_t length) { return buffers_.take(length); }

  // ---- waiting and ending ----
  // Waits until everything the op posted is done: true if it is (or it
  // failed: rethrows) now, else run `r` is resumed once it is.
  bool settleOrResume(Op& op, Resumable& r);
  // Queues the op's run if its wait ended; resumeWoken resumes them (the
  // driver calls it between handlers: never on a link's stack).
  void wake(Op& op);
  void resumeWoken();
  // Ends `op` with `e` (first error wins): withdraws its receives and
  // transfers and wakes it.
  void failOp(Op& op, std::exception_ptr e) override;

  // ---- diagnosis ----
  // "waiting for step 2 from rank 3 (...)".
  std::string pendingDescription(const Op& op) const;
  // The rank `op` waits for (a receive posted, or a send that cannot be
  // written); -1 if none.
  int waitsOn(const Op& op) const;

 private:
  const int rank_;
  TransferView& links_;
  match::Mailbox mailbox_;
  StashBuffers buffers_;     // emptied stash payloads, for the next ones
  std::vector<Op*> active_;  // a few at a time: a vector, no node per call
  // Operations whose wait ended, with their result; resumeWoken swaps them
  // into resuming_, so neither is regrown in steady state.
  struct Woken {
    Resumable* resumer = nullptr;
    std::exception_ptr error;
  };
  std::vector<Woken> woken_, resuming_;
  bool inResume_ = false;
};

}  // namespace tether
