// A root given by name (TETHER_ROOT, MASTER_ADDR) that does not resolve yet,
// as a Kubernetes headless service right after the pods start: wait for it.
#pragma once

#include <chrono>
#include <string>

#include "base/layer.hpp"

TETHER_LAYER(6, "core");

namespace tether::job {

// Returns once the host of `hostPort` resolves (an address returns at once).
// Until then retries with the dial's backoff (10 ms doubling to 1 s, with
// jitter), logs a WARN at most every 5 s naming the name and what the
// resolver said, and at `timeout` throws Error{Timeout} for `rank` naming
// `source`, the name and the resolver's last answer.
void waitForRootName(int rank, const char* source, const std::string& hostPort, std::chrono::milliseconds timeout);

}  // namespace tether::job
