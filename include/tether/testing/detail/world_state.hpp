// tether/testing/detail/world_state.hpp — the shared state of an in-process world.
//
// One mutex guards every mailbox; each rank sleeps on its own condition
// variable (wait_until with the call's deadline — no polling). A rank's mailbox
// is the in-process stand-in for the TCP streams from all its peers; its send
// windows (tether/detail/core/send_windows.hpp, the TCP world's) bound what
// it may leave unreceived in a peer's. Header-only, C++17.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tether/bootstrap.hpp"
#include "tether/detail/defaults.hpp"
#include "tether/detail/core/abort_state.hpp"
#include "tether/detail/core/comm_ids.hpp"
#include "tether/detail/core/deadline_queue.hpp"
#include "tether/detail/core/send_windows.hpp"
#include "tether/detail/env_int.hpp"
#include "tether/testing/detail/message.hpp"

namespace tether {
namespace testing {
namespace detail {

namespace window = ::tether::detail::core::window;
using ::tether::detail::core::Lane;

// A message its sender's window holds (copied): delivered once the peer has
// received enough. Its call waits for it (one of its outstanding
// operations), as over TCP a held frame's call does.
struct HeldMessage {
  Header header;
  std::vector<unsigned char> payload;
  Call* owner;
  static std::uint64_t bytesOf(const HeldMessage& m) { return m.payload.size(); }
};
using SendWindows = ::tether::detail::core::SendWindows<HeldMessage>;

struct WorldState;

// One rank: its calls in flight and the messages waiting for them (the
// shared call table, whose hooks credit the senders' windows), its send
// windows, which collective each of its communicators is in (the shared
// sequence guard), its waiters' condition variable, and the first abort it
// was told of.
struct RankMailbox final : CallTable::Hooks, SequenceGuard::Hooks {
  RankMailbox(WorldState& world, int worldRank, std::uint64_t p2pWindow)
      : world(world), worldRank(worldRank), windows(worldRank, p2pWindow, HeldMessage::bytesOf) {}

  WorldState& world;
  const int worldRank;
  std::condition_variable wake;
  CallTable calls{*this};
  SendWindows windows;
  SequenceGuard sequences{*this};
  // The first abort: its world rank (-1: InProcessWorld::abortAll) and reason.
  ::tether::detail::core::AbortState abort;

  // The Aborted error of the call named `where` of this rank (named by `names`).
  Error abortError(const ::tether::detail::core::RankNames& names, const std::string& where) const {
    if (abort.origin() < 0)
      return Error(ErrorCode::Aborted,
                   ::tether::detail::core::failures::failure(names.who(), where,
                                                             "aborted by InProcessWorld::abortAll: " + abort.reason()),
                   names.rank(), -1);
    return abort.error(names.who(), where, names.rank(), worldRank);
  }
  // The PeerLost error of the call named `where` of this rank (named by
  // `names`) that waits for world rank `gone`, which left: as TcpBootstrap
  // says of a peer that closed its bootstrap.
  static Error leftError(const ::tether::detail::core::RankNames& names, const std::string& where, int gone) {
    namespace failures = ::tether::detail::core::failures;
    const int peer = names.rankOf(gone);
    return Error(ErrorCode::PeerLost,
                 failures::failure(
                     names.who(), where,
                     failures::lostRank(names.name(peer), failures::closedItsBootstrap() + " (its body returned)")),
                 names.rank(), peer);
  }

 private:
  void frameReceived(int src, const Header& h) override;
  void failed(Call&) override;
  void failCall(Call& call, std::exception_ptr e) override { calls.failCall(call, std::move(e)); }
};

// A call that fails at its deadline though nobody waits for it (a request's run).
class Expiring {
 public:
  // Under the world mutex, at or after its deadline.
  virtual void expireLocked() = 0;
  // Its place among the world's deadlines (WorldState::watchLocked).
  ::tether::detail::core::DeadlineHook<Expiring> deadline;

 protected:
  ~Expiring() = default;
};

struct WorldState {
  using Clock = std::chrono::steady_clock;

  WorldState(int worldSize, int ranksPerNode)
      : nranks(worldSize),
        nranksPerNode(ranksPerNode),
        defaultTimeout(timeoutFromEnvironment()),
        p2pWindow(static_cast<std::uint64_t>(
            ::tether::detail::envInt("TETHER_P2P_WINDOW_BYTES", window::kP2PBytes, window::kMinBytes,
                                     static_cast<std::int64_t>(::tether::detail::kMaxP2PWindowBytes)))),
        maxPayload(static_cast<std::uint64_t>(::tether::detail::envInt(
            "TETHER_MAX_PAYLOAD_BYTES", static_cast<std::int64_t>(::tether::detail::kMaxPayloadBytes),
            static_cast<std::int64_t>(::tether::detail::kMinMaxPayloadBytes),
            static_cast<std::int64_t>(::tether::detail::kMaxMaxPayloadBytes)))) {
    for (int r = 0; r < nranks; ++r) mailboxes.push_back(std::make_unique<RankMailbox>(*this, r, p2pWindow));
    watcher_ = std::thread([this] { watch(); });
  }
  ~WorldState() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping_ = true;
    }
    watchWake_.notify_all();
    watcher_.join();
  }
  WorldState(const WorldState&) = delete;
  WorldState& operator=(const WorldState&) = delete;

  const int nranks;
  const int nranksPerNode;
  const std::chrono::milliseconds defaultTimeout;
  const std::uint64_t p2pWindow;   // TETHER_P2P_WINDOW_BYTES, read when the world is made
  const std::uint64_t maxPayload;  // TETHER_MAX_PAYLOAD_BYTES: a larger message is refused, as over TCP
  std::mutex mutex;
  std::vector<std::unique_ptr<RankMailbox>> mailboxes;  // by world rank
  // By world rank: its body returned (InProcessWorld::run), as a TcpBootstrap
  // that was closed — a peer waiting for what it never sent fails at once.
  std::vector<char> left = std::vector<char>(static_cast<std::size_t>(nranks), 0);

  int nodeOf(int worldRank) const { return worldRank / nranksPerNode; }

  RankMailbox& box(int worldRank) const { return *mailboxes[static_cast<std::size_t>(worldRank)]; }

  // `call` of world rank `from` sends `header` and `payload` to `dst`:
  // delivered now when its lane has room, else copied and held by the
  // sender's window (the call waits for it) until the peer has received
  // enough.
  void sendLocked(int from, int dst, const Header& header, const void* payload, Call& call) {
    const auto* bytes = static_cast<const unsigned char*>(payload);
    const auto [window, lane] = box(from).windows.of(dst, header);
    if (window && !window->admit(lane, header.length)) {
      window->hold(lane, HeldMessage{header, std::vector<unsigned char>(bytes, bytes + header.length), &call});
      ++call.outstanding;
      return;
    }
    deliverLocked(dst, from, header, bytes);
  }

  // `to` received (matched) a message from `from` (world ranks): once a
  // credit batch is owed, as the TCP world's receiver returns it, the
  // sender's held messages that fit now are delivered and their calls woken.
  void receivedLocked(int to, int from, const Header& h) {
    const auto [window, lane] = box(to).windows.of(from, h);
    if (!window) return;
    const std::uint64_t credit = window->received(lane, h.length);
    if (credit == 0) return;
    RankMailbox& sender = box(from);
    sender.windows.of(h.kind).credit(Lane(to, lane.comm), credit, [&](HeldMessage&& held) {
      Call& call = *held.owner;
      if (!call.error) --call.outstanding;
      sender.calls.wake(call);
      stirLocked(from);
      sender.wake.notify_all();
      deliverLocked(to, from, held.header, held.payload.data());
    });
  }

  // `worldRank`'s call table may have woken a run (a frame was delivered to
  // it, a held send of its was delivered, a call of its failed).
  void stirLocked(int worldRank) { stirred_.push_back(worldRank); }
  // Resumes the woken runs of every stirred rank until none is left (a run
  // that sends may wake others'): on the thread that holds the mutex, where
  // no run is stepping (detail/run.hpp).
  void drainLocked() {
    while (!stirred_.empty()) {
      const int r = stirred_.back();
      stirred_.pop_back();
      box(r).calls.resumeWoken();
    }
  }

  // Delivers from `srcWorld` to `dstWorld`: into the oldest receive posted under its key
  // (copied once, into the receiver's buffer), else into its stash — a
  // collective frame only if it agrees with the collective its communicator
  // is in there (else it is dropped, and that collective fails); caller
  // holds `mutex`.
  void deliverLocked(int dstWorld, int srcWorld, const Header& header, const unsigned char* payload) {
    RankMailbox& to = box(dstWorld);
    to.calls.deliver(srcWorld, header, payload,
                     [&] { return header.kind != wire::Kind::Collective || to.sequences.admit(srcWorld, header); });
    stirLocked(dstWorld);
    to.wake.notify_all();
  }

  // `worldRank` left (its body returned) or, with gone = false, is back for a
  // new run; wakes every waiter. Leaving fails at once every call of the
  // other ranks that waits for it — a receive posted from it, a send its
  // window holds for it — a request nobody looks at too, as a TCP rank's
  // calls fail when a peer closes its bootstrap.
  void setLeft(int worldRank, bool gone) {
    std::lock_guard<std::mutex> lock(mutex);
    left[static_cast<std::size_t>(worldRank)] = gone ? 1 : 0;
    if (gone)
      for (auto& box : mailboxes) {
        std::vector<Call*> waiting = box->windows.ownersHeldFor(worldRank);
        for (Call* call : box->calls.activeSet())
          if (CallTable::postedFrom(*call, worldRank)) waiting.push_back(call);
        for (Call* call : waiting)
          box->calls.failCall(*call,
                              std::make_exception_ptr(RankMailbox::leftError(*call->names, call->where, worldRank)));
      }
    for (auto& box : mailboxes) box->wake.notify_all();
    drainLocked();
  }

  // Marks every rank aborted (the first reason wins per rank), fails every
  // call in flight there at once with Aborted (a request nobody looks at
  // too) and wakes all waiters: like TCP, where the aborting rank sends an
  // abort notice to its peers and each progress thread fails its calls.
  void abortAll(int byWorldRank, const std::string& reason) {
    std::lock_guard<std::mutex> lock(mutex);
    abortAllLocked(byWorldRank, reason);
    drainLocked();
  }
  void abortAllLocked(int byWorldRank, const std::string& reason) {
    for (auto& box : mailboxes) {
      if (box->abort.record(byWorldRank, reason))
        box->calls.failAll([&](const Call& call) { return box->abortError(*call.names, call.where); });
      box->wake.notify_all();
    }
  }

  // `call` fails at `at` unless it ends first (its hook unlinked), whether or
  // not anyone waits for it: as TCP's progress thread fails a request's op
  // at its deadline (a collective of the world then aborts the world).
  // (The shared deadline queue, tether/detail/core/deadline_queue.hpp, as
  // TCP's; the thread's sleep is cut short only for a new earliest.)
  void watchLocked(Expiring& call, Clock::time_point at) {
    if (watched_.add(call, at)) watchWake_.notify_all();
  }

  // How many collective lanes the ranks count (all communicators; for tests).
  std::size_t collectiveLanes() {
    std::lock_guard<std::mutex> lock(mutex);
    std::size_t n = 0;
    for (const auto& box : mailboxes) n += box->windows.coll.lanes();
    return n;
  }

  // TETHER_TIMEOUT_MS when set and not 0, else kDefaultTimeout: the rule and
  // the reader of TcpBootstrap (tether/detail/env_int.hpp); read when the
  // world is made.
  static std::chrono::milliseconds timeoutFromEnvironment() {
    const ::tether::detail::EnvValue v = ::tether::detail::envValue("TETHER_TIMEOUT_MS");
    return v ? ::tether::detail::parseEnvMs(v.name, v.text, kDefaultTimeout) : kDefaultTimeout;
  }

 private:
  // The world's one timer thread: asleep until the earliest watched
  // deadline (without one, until a call is watched).
  void watch() {
    std::unique_lock<std::mutex> lock(mutex);
    while (!stopping_) {
      if (watched_.empty()) {
        watchWake_.wait(lock);
      } else if (const Clock::time_point at = watched_.earliest(); Clock::now() < at) {
        watchWake_.wait_until(lock, at);
      } else {
        watched_.expire(Clock::now(), [](Expiring& call) { call.expireLocked(); });
        drainLocked();
      }
    }
  }

  std::vector<int> stirred_;  // ranks drainLocked looks at
  ::tether::detail::core::DeadlineQueue<Expiring, &Expiring::deadline> watched_;
  std::condition_variable watchWake_;
  bool stopping_ = false;
  std::thread watcher_;  // last: started once the rest is made
};

inline void RankMailbox::frameReceived(int src, const Header& h) { world.receivedLocked(worldRank, src, h); }
inline void RankMailbox::failed(Call&) {
  world.stirLocked(worldRank);
  wake.notify_all();
}

}  // namespace detail
}  // namespace testing
}  // namespace tether
