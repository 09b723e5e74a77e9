// Calls: the engine's glue, one job: a call's operation from its start to its
// end. It starts an operation's run on the progress thread (OpRun: a
// collective, a send or a receive), waits for it with its deadline, cancels it,
// and ends it;
// in between the operation sends frames (through the send windows,
// SendWindows, onto the link Peers gives) and posts receives (OpTable), and
// a lost peer's operations fail here. It is the OpTable's TransferView and
// Peers' PeerTraffic (the data frames the links read). Calling threads use
// startRun, wait, poll and cancel; the rest runs on the progress
// thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/descriptors.hpp"
#include "base/layer.hpp"
#include "core/abort_channel.hpp"
#include "core/abort_relay.hpp"
#include "core/await_watch.hpp"
#include "core/completion.hpp"
#include "core/driver.hpp"
#include "core/lifecycle.hpp"
#include "core/link_table.hpp"
#include "core/op.hpp"
#include "core/op_table.hpp"
#include "core/payload_pool.hpp"
#include "core/peers.hpp"
#include "core/post_slot.hpp"
#include "core/request_deadlines.hpp"
#include "core/send_window.hpp"
#include "core/sequence.hpp"
#include "core/sequence_guard.hpp"
#include "core/stall_probe.hpp"
#include "core/world_config.hpp"
#include "match/mailbox.hpp"

TETHER_LAYER(6, "core");

namespace tether {

class Calls final : public TransferView, public PeerTraffic {
 public:
  using Clock = std::chrono::steady_clock;
  // What Calls needs of the other units; held by reference.
  struct Parts {
    boost::asio::io_context& io;
    Driver& driver;
    OpTable& ops;
    SequenceGuard& sequences;
    SendWindows& windows;
    PayloadPool& payloads;
    LinkTable& table;
    Peers& peers;
    const Lifecycle& life;
    const AbortChannel& abort;
    const AbortRelay& relay;
    StallProbe& probe;
    AwaitWatch& awaitWatch;
    const std::atomic<bool>& closed;  // the bootstrap was closed (World::close)
  };
  // `abortWorld`: abort the world with this notice, telling the peers
  // (World::abortOnProgress).
  Calls(const WorldConfig& cfg, Parts parts, std::function<void(const wire::AbortNotice&)> abortWorld)
      : cfg_(cfg),
        p_(parts),
        abortWorld_(std::move(abortWorld)),
        deadlines_(parts.io, [this](std::shared_ptr<Op> op) { requestExpired(std::move(op)); }) {}

  // Made in a process that forked after this world started (docs/faults.md,
  // "After fork"): the child's copy is inert.
  bool forked() const { return fds::processId() != creator_; }
  // Throws Error{InvalidArgument} naming both processes when forked().
  void checkProcess(std::string_view opName) const {
    if (forked()) failForked(opName);
  }
  // The same for `op`, whose name is built only then.
  void checkProcess(const Op& op) const {
    if (forked()) failForked(op.name());
  }

  // ---- calling threads ----
  // Starts an operation's run (OpRun::launch): on the progress thread the op
  // is registered and `run` resumed with nullptr, or, if the world aborted
  // meanwhile, with that error (the op not registered). The post's memory is
  // `slot`'s. Throws when the call cannot start (forked, closed, aborted).
  void startRun(Op& op, Resumable& run, PostSlot& slot);
  // The op's work returned (e == nullptr) or threw: it ends, and `done`
  // completes with e once no link uses its buffers.
  void finishOp(Op& op, std::exception_ptr e, const std::shared_ptr<Completion>& done);
  // Waits for `done` (runs the event loop meanwhile, or sleeps while another
  // thread runs it) until `deadline`; at the deadline the op fails with a
  // Timeout naming what it still waited for. Rethrows the op's error.
  void wait(const std::shared_ptr<Op>& op, Completion& done, Clock::time_point deadline);
  // A test: progress on this thread, sleeping briefly when tests stop making
  // any (never past `deadline`; Driver::poll). True if `done`.
  bool poll(Completion& done, Clock::time_point deadline = Clock::time_point::max()) {
    return p_.driver.poll(done, deadline);
  }
  // Ends `op` with Error{Aborted} "cancelled on this rank" if it can still be
  // withdrawn (Request::cancel, tether/request.hpp): a receive not yet
  // matched, or a collective (on the world communicator the peers then get an
  // abort notice). Waits for the progress thread's answer; true if cancelled.
  bool cancel(const std::shared_ptr<Op>& op);

  // ---- progress thread: what operations do ----
  // Queues a frame to world rank `dst` (dialling it if needed). With
  // `reference`, a large payload is not copied and `op` waits until it is written.
  void sendFrame(Op& op, int dst, const wire::FrameHeader& h, const void* payload, bool reference);
  // Posts a receive under `key` (key.src is a world rank).
  void postRecv(Op& op, const match::Key& key, void* buf, std::size_t len);
  // True if everything the op posted is done (rethrows its error), else
  // `run` is resumed once it is (OpTable::settleOrResume).
  bool settleOrResume(Op& op, Resumable& run) { return p_.ops.settleOrResume(op, run); }
  // The op starts as collective op.coll of `seq`'s communicator.
  void beginCollective(CollectiveSeq& seq, Op& op);
  // Ends the sends the window still holds (the bootstrap closes).
  void failHeldSends();
  // The world closed and its loop no longer runs: lets go of the timer
  // (before the io_context, which World destroys first).
  void closed() { deadlines_.stop(); }
  // The last error a call here ended with (an observer is told).
  const std::string& lastError() const { return lastError_; }

  // PeerTraffic
  link::Target onDataHeader(link::Link& link, const wire::FrameHeader& h, bool mayWait) override;
  void onDataComplete(link::Link& link, const wire::FrameHeader& h, const link::Target& t,
                      std::vector<unsigned char>&& stashed) override;
  void onCredit(int peer, wire::Kind data, std::uint64_t comm, std::uint64_t bytes) override;
  void failOpsOfPeer(int peer, bool gone, bool graceful, link::Link& link) override;

  // TransferView
  int abandonTransfers(Op& op) override;
  void unparkAll() override;
  int queuedFor(const Op& op) const override;
  std::string windowNote(const Op& op) const override;
  void frameReceived(int src, const wire::FrameHeader& h) override;
  std::string describeRank(const Op& op, int worldRank) const override {
    return op.nameOf(worldRank, p_.table.remoteOf(worldRank));
  }

 private:
  [[noreturn]] void failForked(std::string_view opName) const;
  int rank() const { return cfg_.rank; }
  void checkStart(const Op& op) const;
  // On the progress thread (startRun's turn or post): registers the op and
  // resumes `run` with nullptr, or, if the world aborted meanwhile, with that
  // error (the op not registered).
  void beginRun(Op& op, Resumable& run);
  void endOp(Op& op, std::exception_ptr& e);
  // A nonblocking call's op reached its Op::expires: it fails with Timeout
  // naming whom it waits for, as a blocking call does.
  void requestExpired(std::shared_ptr<Op> op);

  const WorldConfig& cfg_;
  Parts p_;
  std::function<void(const wire::AbortNotice&)> abortWorld_;
  const pid_t creator_ = fds::processId();
  const detail::core::RankNames worldNames_{cfg_.rank};  // for a frame of no communicator here
  std::string lastError_;
  std::atomic<int> postedStarts_{0};  // starts posted to the loop that have not run yet (startRun)
  RequestDeadlines deadlines_;        // the running ops that have an Op::expires
};

}  // namespace tether
