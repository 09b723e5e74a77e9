// tether/detail/core/failures.hpp — the words of the errors both worlds
// raise: the TCP world (lib/core) and the testing world
// (tether/testing/detail). One function per text, so a runtime's unit test
// against the testing world sees the same message as a run over TCP.
// Header-only, C++17, no fmt.
#pragma once

#include <cstddef>
#include <string>

namespace tether {
namespace detail {
namespace core {
namespace failures {

// "rank 3".
inline std::string rankName(int rank) { return "rank " + std::to_string(rank); }

// "rank 3: allgather#2: <what>": who failed, in which call, and why.
inline std::string failure(const std::string& who, const std::string& where, const std::string& what) {
  return who + ": " + where + ": " + what;
}

// The names of point-to-point calls: "recv from rank 0 tag 3".
template <class Tag>
std::string recvName(int peer, Tag tag) {
  return "recv from rank " + std::to_string(peer) + " tag " + std::to_string(tag);
}
template <class Tag>
std::string sendName(int peer, Tag tag) {
  return "send to rank " + std::to_string(peer) + " tag " + std::to_string(tag);
}

inline std::string cancelledOnThisRank() { return "cancelled on this rank"; }

// "aborted on this rank: <reason>" or "aborted by rank 2: <reason>".
inline std::string aborted(bool onThisRank, int origin, const std::string& reason) {
  return (onThisRank ? std::string("aborted on this rank") : "aborted by " + rankName(origin)) + ": " + reason;
}

// Why a peer is gone when it left in order.
inline std::string closedItsBootstrap() { return "it closed its bootstrap"; }

// The texts below name another rank by `peer`, as its communicator's
// RankNames (rank_names.hpp) gives it: "rank 2", "rank 1 (world 2)".

// "lost rank 2: <why>".
inline std::string lostRank(const std::string& peer, const std::string& why) { return "lost " + peer + ": " + why; }

// `src` sent a frame (`sent`, as described) of another collective at this call.
inline std::string differentCollectives(const std::string& src, const std::string& sent) {
  return src + " is in " + sent + " — the ranks called different collectives";
}

// `src` (a rank in `call`, "broadcast#3") runs it with another root.
inline std::string differentRoots(const std::string& src, const std::string& call, int root, int myRoot) {
  return src + " is in " + call + " with root " + std::to_string(root) + ", this rank's root is " +
         std::to_string(myRoot);
}

// `src` sent a frame of this call (`call`) that no step of it receives.
inline std::string neverReceives(const std::string& src, const std::string& sent, const std::string& call) {
  return src + " sent " + sent + " which this rank's " + call + " never receives";
}

// `src` sent a frame whose length is not the one this rank posted.
inline std::string expectsBytes(const std::string& src, const std::string& sent, std::size_t bytes) {
  return src + " sent " + sent + ", this rank expects " + std::to_string(bytes) + " bytes";
}

// What a call waits for: "a message with tag 7", "step 2".
template <class Tag>
std::string messageWithTag(Tag tag) {
  return "a message with tag " + std::to_string(tag);
}
template <class Step>
std::string stepNumber(Step step) {
  return "step " + std::to_string(step);
}

// "waiting for step 2 from rank 3", and the timeout's text for it.
inline std::string waitingFor(const std::string& what, const std::string& from) {
  return "waiting for " + what + " from " + from;
}
inline std::string timedOut(const std::string& waiting) { return "timed out " + waiting; }

}  // namespace failures
}  // namespace core
}  // namespace detail
}  // namespace tether
