// tether/detail/core/deadlines.hpp — the timeouts and deadlines of a
// communicator's calls, the same in every world (lib/core's Communicator and
// requests, the in-process testing world):
//  * setTimeout(t): t < 0 is InvalidArgument, 0 means the world's default
//    (TETHER_TIMEOUT_MS, else kDefaultTimeout);
//  * Request::wait(t): t < 0 is InvalidArgument, 0 means the communicator's
//    timeout;
//  * no timeout counts beyond ten years (kMaxEnvMs), so a call's deadline —
//    now plus its timeout — cannot overflow the clock, even for
//    std::chrono::milliseconds::max().
// Header-only, C++17.
#pragma once

#include <algorithm>
#include <chrono>
#include <string>

#include "tether/detail/args.hpp"
#include "tether/detail/env_int.hpp"

namespace tether {
namespace detail {
namespace core {

using DeadlineClock = std::chrono::steady_clock;

// The deadline of a call that starts now and may take `timeout`.
inline DeadlineClock::time_point deadlineAfter(std::chrono::milliseconds timeout) {
  return DeadlineClock::now() + std::min(timeout, kMaxEnvMs);
}

// The timeout setTimeout(`given`) sets on `rank`'s communicator;
// `fallback()`: the world's default, asked only for 0.
template <class Fallback>
std::chrono::milliseconds communicatorTimeout(int rank, std::chrono::milliseconds given, Fallback fallback) {
  args::timeout(rank, given);
  return std::min(given.count() == 0 ? std::chrono::milliseconds(fallback()) : given, kMaxEnvMs);
}

// The deadline of Request::wait(`given`) of the call named `name()` on
// `rank` (the name is built only for the error), whose communicator's
// timeout is `communicator`.
template <class Name>
inline DeadlineClock::time_point waitDeadline(int rank, const Name& name, std::chrono::milliseconds given,
                                              std::chrono::milliseconds communicator) {
  if (given.count() < 0) args::waitTimeout(rank, name(), given);
  return deadlineAfter(given.count() == 0 ? communicator : given);
}

}  // namespace core
}  // namespace detail
}  // namespace tether
