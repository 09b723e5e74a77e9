#include "core/root_name.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <random>
#include <thread>

#include "base/endpoint.hpp"
#include "base/log.hpp"
#include "tether/error.hpp"

namespace tether::job {

void waitForRootName(int rank, const char* source, const std::string& hostPort, std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  HostPort hp;
  try {
    hp = parseHostPort(hostPort);
  } catch (const Error&) {
    return;  // malformed: the caller's parse reports it
  }
  if (hp.host.empty() || hp.port == 0) return;  // likewise (no port, or a bare IPv6 address)
  const std::string& host = hp.host;
  const auto began = Clock::now();
  const auto deadline = began + timeout;
  auto nextLog = began + std::chrono::seconds(5);
  auto backoff = std::chrono::milliseconds(10);
  std::minstd_rand jitter(std::random_device{}());
  std::string lastError;
  for (int attempts = 1;; ++attempts) {
    try {
      resolveHost(host);
      if (attempts > 1)
        log::info(rank, "the root name '{}' ({}) resolved after {} attempts, {} ms", host, source, attempts,
                  std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - began).count());
      return;
    } catch (const Error& e) {
      lastError = e.what();
    }
    const auto now = Clock::now();
    if (now >= deadline)
      throw Error(ErrorCode::Timeout,
                  fmt::format("rank {}: {}='{}': the root name '{}' did not resolve within {} ms ({} attempts); the "
                              "resolver's last answer: {}",
                              rank, source, hostPort, host, timeout.count(), attempts, lastError),
                  rank);
    if (now >= nextLog) {
      log::warn(rank, "waiting for the root name '{}' ({}) to resolve, {} ms left: {}", host, source,
                std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count(), lastError);
      nextLog = now + std::chrono::seconds(5);
    }
    // The dial's backoff (lib/link/connector_dial.cpp): jitter up to half of it
    // keeps a thousand ranks from asking the resolver in step.
    const auto wait = backoff + std::chrono::milliseconds(jitter() % static_cast<unsigned>(backoff.count() / 2 + 1));
    std::this_thread::sleep_for(std::min<Clock::duration>(wait, deadline - now));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
}

}  // namespace tether::job
