// What a world and its communicators record about themselves for the public
// InitTimings and Counters (tether/tcp_bootstrap.hpp): the bring-up phases'
// stamps, and counts kept with relaxed atomic increments (any thread; nothing
// locked or allocated where frames go).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <string>

#include "base/layer.hpp"
#include "rendezvous/rendezvous.hpp"
#include "tether/tcp_bootstrap.hpp"

TETHER_LAYER(6, "core");

namespace tether {

// One communicator's counts (shared by its subset barriers' communicators).
struct CommCounters {
  // Indexed by wire::Op (1..7: allgather .. split); send and recv after them.
  static constexpr std::size_t kSend = 8, kRecv = 9, kKinds = 10;
  std::array<std::atomic<std::uint64_t>, kKinds> calls{};
  std::atomic<std::uint64_t> framesSent{0}, bytesSent{0}, framesReceived{0}, bytesReceived{0};
  std::atomic<std::uint64_t> timeouts{0}, aborts{0};

  void call(std::size_t kind) { calls[kind].fetch_add(1, std::memory_order_relaxed); }
  void sent(std::uint64_t bytes) {
    framesSent.fetch_add(1, std::memory_order_relaxed);
    bytesSent.fetch_add(bytes, std::memory_order_relaxed);
  }
  void received(std::uint64_t bytes) {
    framesReceived.fetch_add(1, std::memory_order_relaxed);
    bytesReceived.fetch_add(bytes, std::memory_order_relaxed);
  }
  // A call ended with `e` (not null): counts a Timeout or an Aborted.
  void failed(const std::exception_ptr& e);
};

// The world's link counts (the links are shared by all its communicators).
struct LinkCounters {
  std::atomic<std::uint64_t> dials{0}, redials{0}, budgetCloses{0};
};

// The bring-up phases of a world: microseconds after the constructor's entry
// (-1: not yet, or never). Each is stamped once, the first time.
class InitClock {
 public:
  enum Phase { Listen, HostLocal, Registered, Table, FirstLink, Total, kPhases };
  using Clock = std::chrono::steady_clock;

  explicit InitClock(Clock::time_point began)
      : began_(began),
        startedWall_(std::chrono::system_clock::now() -
                     std::chrono::duration_cast<std::chrono::system_clock::duration>(Clock::now() - began)) {
    for (auto& a : at_) a.store(-1, std::memory_order_relaxed);
  }

  void mark(Phase p) {
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - began_).count();
    std::int64_t none = -1;
    at_[p].compare_exchange_strong(none, us, std::memory_order_relaxed);
  }
  void mark(rdv::Phase p) { mark(p == rdv::Phase::HostLocal ? HostLocal : Registered); }
  std::int64_t at(Phase p) const { return at_[p].load(std::memory_order_relaxed); }
  InitTimings timings() const;
  // "listen +0.3 ms, registered +1.2 ms, table +40.1 ms" (the phases so far).
  std::string text() const;

 private:
  const Clock::time_point began_;
  const std::chrono::system_clock::time_point startedWall_;
  std::array<std::atomic<std::int64_t>, kPhases> at_;
};

// A communicator's counts and its world's, as the public struct.
Counters snapshot(const CommCounters& c, const LinkCounters& links);

}  // namespace tether
