#include "core/observe.hpp"

#include <fmt/format.h>

namespace tether {

void CommCounters::failed(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const Error& err) {
    if (err.code() == ErrorCode::Timeout) timeouts.fetch_add(1, std::memory_order_relaxed);
    if (err.code() == ErrorCode::Aborted) aborts.fetch_add(1, std::memory_order_relaxed);
  } catch (...) {
  }
}

InitTimings InitClock::timings() const {
  InitTimings t;
  t.started = startedWall_;
  auto phase = [this](Phase p) -> std::optional<std::chrono::microseconds> {
    const std::int64_t us = at(p);
    if (us < 0) return std::nullopt;
    return std::chrono::microseconds(us);
  };
  t.listen = phase(Listen);
  t.hostLocal = phase(HostLocal);
  t.registered = phase(Registered);
  t.tableReceived = phase(Table);
  t.firstLink = phase(FirstLink);
  t.total = phase(Total);
  return t;
}

std::string InitClock::text() const {
  static constexpr const char* kNames[kPhases] = {"listen", "host-local", "registered", "table", "first link", "total"};
  std::string out;
  for (int p = Listen; p < kPhases; ++p) {
    if (at(static_cast<Phase>(p)) < 0) continue;
    out += fmt::format("{}{} +{:.1f} ms", out.empty() ? "" : ", ", kNames[p], at(static_cast<Phase>(p)) / 1000.0);
  }
  return out;
}

Counters snapshot(const CommCounters& c, const LinkCounters& links) {
  auto get = [](const std::atomic<std::uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  Counters out;
  out.allgather = get(c.calls[1]);
  out.alltoall = get(c.calls[2]);
  out.alltoallv = get(c.calls[3]);
  out.broadcast = get(c.calls[4]);
  out.barrier = get(c.calls[5]);
  out.subsetBarrier = get(c.calls[6]);
  out.split = get(c.calls[7]);
  out.send = get(c.calls[CommCounters::kSend]);
  out.recv = get(c.calls[CommCounters::kRecv]);
  out.framesSent = get(c.framesSent);
  out.bytesSent = get(c.bytesSent);
  out.framesReceived = get(c.framesReceived);
  out.bytesReceived = get(c.bytesReceived);
  out.timeouts = get(c.timeouts);
  out.aborts = get(c.aborts);
  out.dials = get(links.dials);
  out.redials = get(links.redials);
  out.budgetCloses = get(links.budgetCloses);
  return out;
}

}  // namespace tether
