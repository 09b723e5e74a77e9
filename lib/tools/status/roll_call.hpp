// tether-status's asking (docs/troubleshooting.md, "Where is every rank?"):
// as an observer that proves the job's secret (link/observer.hpp), it asks
// rank 0 at the root address for every rank's address and its status, then
// every other rank for its status, at most `parallel` at once, each within
// `timeout`. A rank whose process is stopped still has its connection
// accepted by its kernel: only the deadline tells it did not answer.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/peer_address.hpp"
#include "wire/handshake.hpp"
#include "wire/notice.hpp"

namespace tether::status {

struct Job {
  PeerAddress root;
  wire::Secret secret{};
  std::uint64_t worldId = 0;
};

struct RankReport {
  enum class State { Alive, NoAnswer, Lost };
  int rank = 0;
  State state = State::NoAnswer;
  std::string address;
  std::optional<wire::StatusAnswer> answer;  // Alive
  std::string why;                           // NoAnswer, Lost: what the attempt got
};

const char* stateName(RankReport::State s);

struct RollCall {
  std::string root;  // the root's address, as dialled
  std::vector<RankReport> ranks;
  double elapsedMs = 0;
};

// Nothing could be asked: rank 0 did not answer, refused, or refused us.
struct CannotAsk : std::runtime_error {
  using std::runtime_error::runtime_error;
};

RollCall rollCall(const Job& job, std::chrono::milliseconds timeout, int parallel);

}  // namespace tether::status
