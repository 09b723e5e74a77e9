// tether/testing/detail/endpoint.hpp — one rank's view of one in-process communicator.
//
// Posts and takes messages on the shared mailboxes, with the call's deadline,
// abort handling and errors that name rank, peer and operation — the in-process
// counterpart of the TCP link layer. Header-only, C++17.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "tether/error.hpp"
#include "tether/testing/detail/message.hpp"
#include "tether/testing/detail/world_state.hpp"

namespace tether {
namespace testing {
namespace detail {

class Endpoint {
 public:
  using Clock = std::chrono::steady_clock;

  Endpoint(std::shared_ptr<WorldState> world, std::uint64_t comm, std::vector<int> members, int rank,
           std::chrono::milliseconds timeout)
      : world_(std::move(world)), comm_(comm), members_(std::move(members)), rank_(rank), timeoutMs_(timeout.count()) {}

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(members_.size()); }
  int worldRank() const { return members_[static_cast<std::size_t>(rank_)]; }
  int worldRankOf(int rank) const { return members_[static_cast<std::size_t>(rank)]; }
  std::uint64_t comm() const { return comm_; }
  const std::vector<int>& members() const { return members_; }
  const std::shared_ptr<WorldState>& world() const { return world_; }

  std::chrono::milliseconds timeout() const { return std::chrono::milliseconds(timeoutMs_.load()); }
  void setTimeout(std::chrono::milliseconds timeout) { timeoutMs_.store(timeout.count()); }

  // The deadline of a call starting now (clamped so that huge timeouts cannot overflow).
  Clock::time_point deadline() const {
    const std::chrono::milliseconds cap = std::chrono::hours(24 * 365 * 10);
    return Clock::now() + std::min(timeout(), cap);
  }

  // "rank 1", or "rank 1 (world 3)" on a child communicator.
  std::string who() const {
    std::string text = "rank " + std::to_string(rank_);
    if (comm_ != 0) text += " (world " + std::to_string(worldRank()) + ")";
    return text;
  }

  [[noreturn]] void fail(ErrorCode code, const std::string& where, int peer, const std::string& what) const {
    throw Error(code, who() + ": " + where + ": " + what, rank_, peer);
  }

  void throwIfAborted(const std::string& where) const {
    std::lock_guard<std::mutex> lock(world_->mutex);
    throwIfAbortedLocked(where);
  }

  // Copies the message into the peer's mailbox (send is buffered, like a socket buffer).
  void post(int peer, ChannelKey key, Message message, const std::string& where) const {
    key.comm = comm_;
    key.source = rank_;
    std::lock_guard<std::mutex> lock(world_->mutex);
    throwIfAbortedLocked(where);
    world_->deliverLocked(worldRankOf(peer), key, std::move(message));
  }

  // Point-to-point receive: the oldest posted recv for (peer, tag) takes the
  // oldest message for it; sizes must agree.
  void receivePointToPoint(void* data, std::size_t bytes, int peer, int tag, const std::string& where) const {
    const auto until = deadline();
    ChannelKey key;
    key.comm = comm_;
    key.channel = Channel::PointToPoint;
    key.sequence = static_cast<std::uint64_t>(tag);
    key.source = peer;

    std::unique_lock<std::mutex> lock(world_->mutex);
    RankMailbox& box = mailbox();
    throwIfAbortedLocked(where);
    const std::uint64_t ticket = box.nextTicket++;
    box.postedRecvs[key].push_back(ticket);
    PostedRecvGuard guard{box, key, ticket};

    const std::string waitingFor = "a message with tag " + std::to_string(tag) + " from rank " + std::to_string(peer);
    // Messages already here for the receives ahead of this one and for it:
    // the sender leaving does not take them away.
    auto queuedForUs = [&] {
      const auto& queue = box.postedRecvs[key];
      const auto ahead = static_cast<std::size_t>(std::find(queue.begin(), queue.end(), ticket) - queue.begin());
      auto in = box.inbox.find(key);
      return in != box.inbox.end() && in->second.size() > ahead;
    };
    waitLocked(
        lock, until, where, peer, waitingFor,
        [&] { return box.postedRecvs[key].front() == ticket && box.inbox.count(key) != 0; }, queuedForUs);
    Message message = popLocked(box, key);
    if (message.payload.size() != bytes) {
      fail(ErrorCode::Protocol, where, peer,
           "rank " + std::to_string(peer) + " sent send tag " + std::to_string(tag) + " (" +
               std::to_string(message.payload.size()) + " bytes), this rank expects " + std::to_string(bytes) +
               " bytes");
    }
    if (bytes != 0) std::memcpy(data, message.payload.data(), bytes);
  }

  // Collective receive of `key.step` from `peer`, as the TCP world matches a
  // frame: a message of another operation at the same call id, or of the
  // wrong size, is a Protocol error naming both sides.
  std::vector<unsigned char> receiveCollective(ChannelKey key, const OpStamp& expected, int peer,
                                               std::size_t payloadBytes, Clock::time_point until) const {
    key.comm = comm_;
    key.source = peer;
    const std::string where = expected.call();
    std::unique_lock<std::mutex> lock(world_->mutex);
    RankMailbox& box = mailbox();
    waitLocked(lock, until, where, peer, "step " + std::to_string(key.step) + " from rank " + std::to_string(peer),
               [&] {
                 rejectForeignCallsLocked(box, key, expected);
                 return box.inbox.count(key) != 0;
               });
    Message message = popLocked(box, key);
    if (message.payload.size() != payloadBytes) {
      fail(ErrorCode::Protocol, where, peer,
           "rank " + std::to_string(peer) + " sent " + message.describe() + ", this rank expects " +
               std::to_string(payloadBytes) + " bytes");
    }
    return std::move(message.payload);
  }

  // After a collective: any message left at its call id was sent by a rank
  // that called something else or ran another algorithm.
  void rejectLeftovers(ChannelKey key, const OpStamp& expected) const {
    key.comm = comm_;
    std::lock_guard<std::mutex> lock(world_->mutex);
    RankMailbox& box = mailbox();
    rejectForeignCallsLocked(box, key, expected);
    key.source = INT_MIN;
    key.step = 0;
    auto it = box.inbox.lower_bound(key);
    if (it == box.inbox.end() || !sameCall(it->first, key) || it->second.empty()) return;
    fail(ErrorCode::Protocol, expected.call(), it->first.source,
         "rank " + std::to_string(it->first.source) + " sent " + it->second.front().describe() + " which this rank's " +
             expected.call() + " never receives");
  }

 private:
  // Removes a recv's ticket however it ends, so later recvs for the key can proceed.
  struct PostedRecvGuard {
    RankMailbox& box;
    ChannelKey key;
    std::uint64_t ticket;
    ~PostedRecvGuard() {
      auto it = box.postedRecvs.find(key);
      if (it == box.postedRecvs.end()) return;
      auto& queue = it->second;
      queue.erase(std::remove(queue.begin(), queue.end(), ticket), queue.end());
      if (queue.empty()) box.postedRecvs.erase(it);
      box.wake.notify_all();
    }
  };

  RankMailbox& mailbox() const { return *world_->mailboxes[static_cast<std::size_t>(worldRank())]; }

  void throwIfAbortedLocked(const std::string& where) const {
    const RankMailbox& box = mailbox();
    if (!box.aborted) return;
    if (box.abortedBy == worldRank()) {
      fail(ErrorCode::Aborted, where, box.abortedBy, "aborted on this rank: " + box.abortReason);
    }
    if (box.abortedBy < 0) {
      fail(ErrorCode::Aborted, where, -1, "aborted by InProcessWorld::abortAll: " + box.abortReason);
    }
    fail(ErrorCode::Aborted, where, box.abortedBy,
         "aborted by rank " + std::to_string(box.abortedBy) + ": " + box.abortReason);
  }

  // `peer` (a rank here) left, as TcpBootstrap says of a peer that closed its
  // bootstrap: PeerLost "lost rank P: it closed its bootstrap".
  void throwIfLeftLocked(const std::string& where, int peer) const {
    if (peer < 0 || peer >= size() || !world_->left[static_cast<std::size_t>(worldRankOf(peer))]) return;
    fail(ErrorCode::PeerLost, where, peer,
         "lost rank " + std::to_string(peer) + ": it closed its bootstrap (its body returned)");
  }

  // Sleeps on this rank's condition variable until ready(), an abort, or the
  // deadline. A peer that left fails the wait unless queued(): what it waits
  // for is already here (behind another thread's receive).
  template <class Ready, class Queued>
  void waitLocked(std::unique_lock<std::mutex>& lock, Clock::time_point until, const std::string& where, int peer,
                  const std::string& waitingFor, Ready ready, Queued queued) const {
    RankMailbox& box = mailbox();
    for (;;) {
      throwIfAbortedLocked(where);
      if (ready()) return;
      if (!queued()) throwIfLeftLocked(where, peer);
      if (box.wake.wait_until(lock, until) == std::cv_status::timeout) {
        throwIfAbortedLocked(where);
        if (ready()) return;
        fail(ErrorCode::Timeout, where, peer, "timed out waiting for " + waitingFor);
      }
    }
  }
  template <class Ready>
  void waitLocked(std::unique_lock<std::mutex>& lock, Clock::time_point until, const std::string& where, int peer,
                  const std::string& waitingFor, Ready ready) const {
    waitLocked(lock, until, where, peer, waitingFor, ready, [] { return false; });
  }

  static bool sameCall(const ChannelKey& a, const ChannelKey& b) {
    return a.comm == b.comm && a.channel == b.channel && a.group == b.group && a.sequence == b.sequence;
  }

  // A message at this call id from another operation, or with another root.
  void rejectForeignCallsLocked(const RankMailbox& box, ChannelKey key, const OpStamp& expected) const {
    key.source = INT_MIN;
    key.step = 0;
    for (auto it = box.inbox.lower_bound(key); it != box.inbox.end() && sameCall(it->first, key); ++it) {
      if (it->second.empty()) continue;
      const Message& m = it->second.front();
      const std::string from = "rank " + std::to_string(it->first.source);
      if (m.op.name != expected.name)
        fail(ErrorCode::Protocol, expected.call(), it->first.source,
             from + " is in " + m.describe() + " — the ranks called different collectives");
      if (m.op.root != expected.root)
        fail(ErrorCode::Protocol, expected.call(), it->first.source,
             from + " is in " + m.op.call() + " with root " + std::to_string(m.op.root) + ", this rank's root is " +
                 std::to_string(expected.root));
    }
  }

  static Message popLocked(RankMailbox& box, const ChannelKey& key) {
    auto it = box.inbox.find(key);
    Message message = std::move(it->second.front());
    it->second.pop_front();
    if (it->second.empty()) box.inbox.erase(it);
    return message;
  }

  std::shared_ptr<WorldState> world_;
  std::uint64_t comm_;
  std::vector<int> members_;  // world rank of each communicator rank
  int rank_;
  std::atomic<long long> timeoutMs_;
};

}  // namespace detail
}  // namespace testing
}  // namespace tether
