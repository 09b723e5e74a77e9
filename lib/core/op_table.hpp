// The operation table: the operations in flight on this world, the mailbox
// their receives wait in, and how they are posted, settle, wake and fail —
// the shared call table (tether/detail/core/call_table.hpp) over this
// world's links. Progress thread only.
#pragma once

#include <exception>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/layer.hpp"
#include "core/op.hpp"
#include "core/sequence_guard.hpp"
#include "tether/detail/core/call_table.hpp"
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
  // waits for, SendWindows); -1 if none.
  virtual int queuedFor(const Op& op) const = 0;
  // Why `op`'s send waits, when a send window holds it: ": it has not yet
  // received ... (TETHER_P2P_WINDOW_BYTES=...)"; "" otherwise.
  virtual std::string windowNote(const Op& op) const = 0;
  // A data frame `h` from `src` was received (into a receive or out of the
  // stash), or dropped: credit for its sender's window.
  virtual void frameReceived(int src, const wire::FrameHeader& h) = 0;
  // World rank `rank` as `op`'s errors name it, with its address: "rank 3
  // (10.0.0.7:41235)", "rank 1 (world 3, 10.0.0.7:41235)".
  virtual std::string describeRank(const Op& op, int rank) const = 0;

 protected:
  ~TransferView() = default;
};

using CallTable = detail::core::CallTable<TcpCalls>;

// The shared table (posting, matching, settling, failing: call_table.hpp)
// with this world's links behind its hooks, and what diagnosis asks of it.
class OpTable final : public CallTable::Hooks, public CallTable, public OpFailer {
 public:
  OpTable(int rank, TransferView& links)
      : CallTable(static_cast<CallTable::Hooks&>(*this)), rank_(rank), links_(links) {}

  // Some operation has a receive posted from `peer`.
  bool awaits(int peer) const;
  // A referenced send of `op` was written, or (`abandoned`) a transfer it gave up on ended.
  void transferDone(Op& op, bool abandoned);
  // Ends `op` with `e` (first error wins): withdraws its receives and
  // transfers and wakes it.
  void failOp(Op& op, std::exception_ptr e) override { failCall(op, std::move(e)); }

  // ---- diagnosis ----
  // "waiting for step 2 from rank 3 (...)".
  std::string pendingDescription(const Op& op) const;
  // The rank `op` waits for (a receive posted, or a send that cannot be
  // written); -1 if none.
  int waitsOn(const Op& op) const;

 private:
  // CallTable::Hooks.
  void frameReceived(int src, const wire::FrameHeader& h) override { links_.frameReceived(src, h); }
  void failed(Op& op) override;

  const int rank_;
  TransferView& links_;
};

}  // namespace tether
