// tether/testing/detail/world_state.hpp — the shared state of an in-process world.
//
// One mutex guards every mailbox; each rank sleeps on its own condition
// variable (wait_until with the call's deadline — no polling). A rank's mailbox
// is the in-process stand-in for the TCP streams from all its peers. Header-only, C++17.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tether/bootstrap.hpp"
#include "tether/detail/core/abort_state.hpp"
#include "tether/detail/env_int.hpp"
#include "tether/detail/match/mailbox.hpp"
#include "tether/error.hpp"
#include "tether/testing/detail/message.hpp"

namespace tether {
namespace testing {
namespace detail {

// Ends a nonblocking call's waits from another thread: Request::cancel, or
// Request::wait whose timeout passed. Read and written under the world mutex.
enum class Interrupt : std::uint8_t { None, Cancelled, TimedOut };

// One posted receive: the message that matched it, once one has.
struct RecvSlot {
  bool done = false;
  Message message;
};

struct PostedRecv {
  RecvSlot* slot = nullptr;
  const void* owner = nullptr;  // the slot itself
};

// Matching under the full key, the same code as the TCP world's
// (tether/detail/match/mailbox.hpp): posted receives first in, first out
// per key, so receives are non-overtaking across threads too.
using Matching = ::tether::detail::match::Mailbox<ChannelKey, ChannelKeyHash, PostedRecv, Message>;

struct RankMailbox {
  std::condition_variable wake;
  Matching matching;

  // The first abort: its world rank (-1: InProcessWorld::abortAll) and reason.
  ::tether::detail::core::AbortState abort;
};

struct WorldState {
  WorldState(int worldSize, int ranksPerNode)
      : nranks(worldSize), nranksPerNode(ranksPerNode), defaultTimeout(timeoutFromEnvironment()) {
    for (int r = 0; r < nranks; ++r) mailboxes.push_back(std::make_unique<RankMailbox>());
  }

  const int nranks;
  const int nranksPerNode;
  const std::chrono::milliseconds defaultTimeout;
  std::mutex mutex;
  std::vector<std::unique_ptr<RankMailbox>> mailboxes;  // by world rank
  // By world rank: its body returned (InProcessWorld::run), as a TcpBootstrap
  // that was closed — a peer waiting for what it never sent fails at once.
  std::vector<char> left = std::vector<char>(static_cast<std::size_t>(nranks), 0);

  int nodeOf(int worldRank) const { return worldRank / nranksPerNode; }

  // Delivers a copy to `dstWorld`: to the oldest receive posted under `key`,
  // else kept until one is; caller holds `mutex`.
  void deliverLocked(int dstWorld, const ChannelKey& key, Message message) {
    RankMailbox& box = *mailboxes[static_cast<std::size_t>(dstWorld)];
    if (auto posted = box.matching.claimPosted(key)) {
      posted->slot->message = std::move(message);
      posted->slot->done = true;
    } else {
      box.matching.stash(key, std::move(message), /*unique=*/false);
    }
    box.wake.notify_all();
  }

  // `worldRank` left (its body returned) or, with gone = false, is back for a
  // new run; wakes every waiter.
  void setLeft(int worldRank, bool gone) {
    std::lock_guard<std::mutex> lock(mutex);
    left[static_cast<std::size_t>(worldRank)] = gone ? 1 : 0;
    for (auto& box : mailboxes) box->wake.notify_all();
  }

  // Marks every rank aborted (the first reason wins per rank) and wakes all
  // waiters: like TCP, where the aborting rank sends an abort notice to its peers.
  void abortAll(int byWorldRank, const std::string& reason) {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto& box : mailboxes) {
      box->abort.record(byWorldRank, reason);
      box->wake.notify_all();
    }
  }

  // TETHER_TIMEOUT_MS when set and not 0, else kDefaultTimeout: the rule and
  // the reader of TcpBootstrap (tether/detail/env_int.hpp); read when the
  // world is made.
  static std::chrono::milliseconds timeoutFromEnvironment() {
    const ::tether::detail::EnvValue v = ::tether::detail::envValue("TETHER_TIMEOUT_MS");
    return v ? ::tether::detail::parseEnvMs(v.name, v.text, kDefaultTimeout) : kDefaultTimeout;
  }
};

}  // namespace detail
}  // namespace testing
}  // namespace tether
