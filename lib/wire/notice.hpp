// Payloads of the world's own control frames after the rendezvous: the abort
// notice (Kind::Abort), the stall probe (Kind::StatusQuery/StatusAnswer)
// that a timed-out collective uses to name the rank that is behind (and that
// an observer, tether-status, asks with comm and coll 0), and the
// send windows' credit (Kind::Credit, Kind::CollectiveCredit). Byte layout:
// docs/wire-protocol.md.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/layer.hpp"

TETHER_LAYER(1, "wire");

namespace tether::wire {

inline constexpr std::uint32_t kNoRank = 0xffffffffu;

// The world is aborted: `origin` decided it (it saw the loss, or abort() was
// called there); `lost`, if not kNoRank, is the rank whose loss caused it.
struct AbortNotice {
  std::uint32_t origin = 0;
  std::string reason;
  std::uint32_t lost = kNoRank;
};

// "Where are you in collective `coll` of communicator `comm`?"
struct StatusQuery {
  std::uint32_t id = 0;  // the asker's number, echoed in the answer
  std::uint64_t comm = 0;
  std::uint64_t coll = 0;
};

enum class StallState : std::uint8_t {
  NotEntered = 0,  // the answerer has not started `coll` yet
  Running = 1,     // it runs `coll`
  Finished = 2,    // it has finished `coll`
  NoComm = 3,      // it has no such communicator (not created yet, or freed)
};

// What an observer's answer adds (absent from the answer to a peer's probe):
// the rank as a whole, not one collective.
struct RankDetail {
  std::uint32_t rank = 0, nranks = 0;
  std::string call;            // the call it is in, "allgather#17812 step 3"; empty: none
  std::uint64_t inCallMs = 0;  // for how long
  std::uint32_t linksOpen = 0;
  std::string lastError;  // the last error a call of this rank ended with (or the abort's reason); empty: none
};

struct StatusAnswer {
  std::uint32_t id = 0;
  StallState state = StallState::NotEntered;
  std::uint32_t waitsOn = kNoRank;  // Running (or NotEntered, still in an earlier one): the world rank it waits for
  std::string doing;                // what it is doing, in words ("in allgather#6")
  std::optional<RankDetail> detail;  // an observer's answer only
};

std::vector<unsigned char> encode(const AbortNotice& m);
std::vector<unsigned char> encode(const StatusQuery& m);
std::vector<unsigned char> encode(const StatusAnswer& m);
// Credit: the cost (payload + per-message cost) of point-to-point messages received.
// Fixed size, so that a credit is encoded without a vector.
constexpr std::size_t kCreditBytes = 8;
std::array<unsigned char, kCreditBytes> encodeCredit(std::uint64_t bytes);
// CollectiveCredit: the communicator, then the cost of its collective frames received.
struct CollectiveCredit {
  std::uint64_t comm = 0;
  std::uint64_t bytes = 0;
};
constexpr std::size_t kCollectiveCreditBytes = 16;
std::array<unsigned char, kCollectiveCreditBytes> encode(const CollectiveCredit& c);
// Throw std::out_of_range / std::invalid_argument on malformed input.
AbortNotice decodeAbortNotice(const std::vector<unsigned char>& b);
StatusQuery decodeStatusQuery(const std::vector<unsigned char>& b);
StatusAnswer decodeStatusAnswer(const std::vector<unsigned char>& b);
std::uint64_t decodeCredit(const std::vector<unsigned char>& b);
CollectiveCredit decodeCollectiveCredit(const std::vector<unsigned char>& b);

}  // namespace tether::wire
