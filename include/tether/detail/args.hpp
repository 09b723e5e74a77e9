// tether/detail/args.hpp — argument checks shared by every Bootstrap
// implementation (TcpBootstrap and the in-process testing world), so a
// caller's mistake gets the same InvalidArgument, with the same words,
// everywhere — and always before a collective id is consumed, so the
// communicator stays usable. Header-only, C++17.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tether/detail/defaults.hpp"
#include "tether/error.hpp"

namespace tether {
namespace detail {
namespace args {

[[noreturn]] inline void invalid(int rank, const std::string& op, const std::string& what, int peer = -1) {
  throw Error(ErrorCode::InvalidArgument, "rank " + std::to_string(rank) + ": " + op + ": " + what, rank, peer);
}

// `what` `value` (a rank of the communicator) must be in [0, size).
inline void inRange(int rank, int size, const std::string& op, const char* what, int value) {
  if (value < 0 || value >= size)
    invalid(rank, op,
            std::string(what) + " " + std::to_string(value) + " is out of range [0, " + std::to_string(size) + ")",
            value);
}

inline void peer(int rank, int size, const std::string& op, int peer) { inRange(rank, size, op, "peer", peer); }

inline void tag(int rank, const std::string& op, int tag) {
  if (tag < 0) invalid(rank, op, "negative tag " + std::to_string(tag));
}

// A buffer of `bytes` at `data`: present, and not running past the end of
// the address space (a size no buffer can have, e.g. a negative count cast
// to size_t).
inline void buffer(int rank, const std::string& op, const void* data, std::size_t bytes) {
  if (!data && bytes) invalid(rank, op, "null buffer for " + std::to_string(bytes) + " bytes");
  if (data && bytes > UINTPTR_MAX - reinterpret_cast<std::uintptr_t>(data))
    invalid(rank, op, "a buffer of " + std::to_string(bytes) + " bytes does not fit in the address space");
}

// A point-to-point call's arguments (send, recv, isend, irecv): the peer,
// the tag and the buffer.
inline void message(int rank, int size, const std::string& op, const void* data, std::size_t bytes, int peer, int tag) {
  args::peer(rank, size, op, peer);
  args::tag(rank, op, tag);
  buffer(rank, op, data, bytes);
}

// `count` blocks of `bytes`: their total, or InvalidArgument if it overflows
// size_t (`what` names the product, e.g. "bytesPerRank x ranks").
inline std::size_t product(int rank, const std::string& op, std::size_t bytes, std::size_t count, const char* what) {
  if (count != 0 && bytes > SIZE_MAX / count)
    invalid(rank, op,
            std::string(what) + " = " + std::to_string(bytes) + " x " + std::to_string(count) + " overflows size_t");
  return bytes * count;
}

// allgather: the buffer holds every rank's block.
inline void allgather(int rank, int size, const std::string& op, const void* data, std::size_t bytesPerRank) {
  buffer(rank, op, data, bytesPerRank);
  buffer(rank, op, data, product(rank, op, bytesPerRank, static_cast<std::size_t>(size), "bytesPerRank x ranks"));
}

inline bool overlap(const void* a, std::size_t aBytes, const void* b, std::size_t bBytes) {
  if (aBytes == 0 || bBytes == 0) return false;
  auto x = reinterpret_cast<std::uintptr_t>(a), y = reinterpret_cast<std::uintptr_t>(b);
  return x < y + bBytes && y < x + aBytes;
}

// alltoall: the same buffer for both (in place) is allowed; a partial overlap is not.
inline void alltoall(int rank, int size, const void* send, const void* recv, std::size_t bytesPerRank,
                     const std::string& op = "alltoall") {
  const std::size_t total = product(rank, op, bytesPerRank, static_cast<std::size_t>(size), "bytesPerRank x ranks");
  buffer(rank, op, send, total);
  buffer(rank, op, recv, total);
  if (send != recv && overlap(send, total, recv, total))
    invalid(rank, op, "send and receive buffers overlap (pass the same pointer for in place)");
}

// alltoallv: counts and displacements present, this rank's block to itself
// the same size both ways, buffers present and disjoint.
inline void alltoallv(int rank, int size, const void* send, const std::size_t* sendCounts,
                      const std::size_t* sendDispls, const void* recv, const std::size_t* recvCounts,
                      const std::size_t* recvDispls) {
  const char* op = "alltoallv";
  if (!sendCounts || !sendDispls || !recvCounts || !recvDispls) invalid(rank, op, "null count or displacement array");
  std::size_t sendExtent = 0, recvExtent = 0;
  auto end = [&](const char* side, const std::size_t* displs, const std::size_t* counts, int p) {
    if (displs[p] > SIZE_MAX - counts[p])
      invalid(rank, op,
              std::string(side) + "Displs[" + std::to_string(p) + "] + " + side + "Counts[" + std::to_string(p) +
                  "] = " + std::to_string(displs[p]) + " + " + std::to_string(counts[p]) + " overflows size_t",
              p);
    return displs[p] + counts[p];
  };
  for (int p = 0; p < size; ++p) {
    if (sendCounts[p]) sendExtent = std::max(sendExtent, end("send", sendDispls, sendCounts, p));
    if (recvCounts[p]) recvExtent = std::max(recvExtent, end("recv", recvDispls, recvCounts, p));
  }
  if (sendCounts[rank] != recvCounts[rank])
    invalid(rank, op,
            "this rank sends itself " + std::to_string(sendCounts[rank]) + " bytes but expects " +
                std::to_string(recvCounts[rank]));
  buffer(rank, op, send, sendExtent);
  buffer(rank, op, recv, recvExtent);
  if (overlap(send, sendExtent, recv, recvExtent)) invalid(rank, op, "send and receive buffers overlap");
}

// A point-to-point message travels as one frame: larger than the receiver's
// TETHER_MAX_PAYLOAD_BYTES (`limit`, the same on every rank) it could never
// be accepted, so it is refused here, at either end.
inline void payload(int rank, const std::string& op, std::size_t bytes, std::uint64_t limit) {
  if (bytes > limit)
    invalid(rank, op,
            std::to_string(bytes) + " bytes is more than TETHER_MAX_PAYLOAD_BYTES=" + std::to_string(limit) +
                ", the largest message a receiver accepts (send it in parts, or raise TETHER_MAX_PAYLOAD_BYTES on "
                "every rank)");
}

inline void root(int rank, int size, int root) { inRange(rank, size, "broadcast", "root", root); }

// A subset barrier's list, sorted; checked for range, duplicates and the caller.
inline std::vector<int> subset(int rank, int size, std::vector<int> ranks) {
  const char* op = "subset barrier";
  std::sort(ranks.begin(), ranks.end());
  if (std::adjacent_find(ranks.begin(), ranks.end()) != ranks.end()) invalid(rank, op, "duplicate rank in the list");
  for (int r : ranks) inRange(rank, size, op, "rank", r);
  if (!std::binary_search(ranks.begin(), ranks.end(), rank)) invalid(rank, op, "the list does not contain this rank");
  return ranks;
}

inline void color(int rank, int color, int noColor) {
  if (color < 0 && color != noColor) invalid(rank, "split", "negative color " + std::to_string(color));
}

inline void timeout(int rank, std::chrono::milliseconds t) {
  if (t.count() < 0)
    invalid(rank, "setTimeout",
            "negative timeout " + std::to_string(t.count()) + " ms (0 means the default: TETHER_TIMEOUT_MS, else " +
                std::to_string(kDefaultTimeout.count()) + " ms)");
}

// Request::wait(timeout) of the call `op`: 0 means the communicator's timeout.
inline void waitTimeout(int rank, const std::string& op, std::chrono::milliseconds t) {
  if (t.count() < 0)
    invalid(
        rank, op,
        "Request::wait: negative timeout " + std::to_string(t.count()) + " ms (0 means the communicator's timeout)");
}

}  // namespace args
}  // namespace detail
}  // namespace tether
