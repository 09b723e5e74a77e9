// tether/detail/coll/front.hpp — the front end of every Bootstrap: public
// arguments -> checked collective call. Each function checks the caller's
// arguments (tether/detail/args.hpp: InvalidArgument before a byte is sent or
// a collective id is taken) and builds the Call the algorithms record
// (table.hpp), with the memory it points to. TcpBootstrap (blocking and
// nonblocking calls) and the in-process testing world both build their calls
// here, so a call means the same everywhere. Header-only, C++17.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "tether/detail/args.hpp"
#include "tether/detail/coll/table.hpp"

namespace tether {
namespace detail {
namespace coll {

// A collective call built from public arguments. It owns what `in` points to
// for an in-place all-to-all (moving it keeps that valid; copying is not
// allowed); an all-to-all(v)'s `call.blocks` are the caller's arrays.
struct Prepared {
  Call call;
  const void* in = nullptr;  // the caller's send data (may equal `out`)
  void* out = nullptr;       // the caller's receive buffer
  // In-place all-to-all: the blocks to send, copied before any is
  // overwritten by an arriving block. A nonblocking call keeps it until it ends.
  std::vector<unsigned char> keep;

  explicit Prepared(Op op) { call.op = op; }
  Prepared(Prepared&&) = default;
  Prepared& operator=(Prepared&&) = default;
  Prepared(const Prepared&) = delete;
  Prepared& operator=(const Prepared&) = delete;
};

// `op` names the public call in errors ("allgather", "iallgather").
inline Prepared allgatherCall(int rank, int size, const char* op, void* data, std::size_t bytesPerRank) {
  args::allgather(rank, size, op, data, bytesPerRank);
  Prepared p(Op::Allgather);
  p.call.bytes = bytesPerRank;
  p.in = p.out = data;
  return p;
}

inline Prepared alltoallCall(int rank, int size, const char* op, const void* send, void* recv,
                             std::size_t bytesPerRank) {
  args::alltoall(rank, size, send, recv, bytesPerRank, op);
  const auto n = static_cast<std::size_t>(size);
  Prepared p(Op::Alltoall);  // uniform: call.blocks stays null (alltoall.hpp)
  if (send == recv && bytesPerRank) {
    auto* begin = static_cast<const unsigned char*>(send);
    p.keep.assign(begin, begin + n * bytesPerRank);
    send = p.keep.data();
  }
  p.call.bytes = bytesPerRank;
  p.in = send;
  p.out = recv;
  return p;
}

// The arrays are the caller's: they must outlive the call (a blocking one).
inline Prepared alltoallvCall(int rank, int size, const void* send, const std::size_t* sendCounts,
                              const std::size_t* sendDispls, void* recv, const std::size_t* recvCounts,
                              const std::size_t* recvDispls) {
  args::alltoallv(rank, size, send, sendCounts, sendDispls, recv, recvCounts, recvDispls);
  Prepared p(Op::Alltoallv);
  for (int i = 0; i < size; ++i) p.call.bytes = std::max({p.call.bytes, sendCounts[i], recvCounts[i]});
  p.call.blocks = Blocks{sendCounts, sendDispls, recvCounts, recvDispls};
  p.in = send;
  p.out = recv;
  return p;
}

inline Prepared broadcastCall(int rank, int size, void* data, std::size_t bytes, int root) {
  args::root(rank, size, root);
  args::buffer(rank, "broadcast", data, bytes);
  Prepared p(Op::Broadcast);
  p.call.bytes = bytes;
  p.call.root = root;
  p.in = p.out = data;
  return p;
}

inline Prepared barrierCall() { return Prepared(Op::Barrier); }

// split(): every rank's (color, key) pair, gathered in place in `pairs`
// (2 x size entries; see core/split.hpp for the members it gives).
inline Prepared splitCall(int rank, int size, int color, int key, int noColor, std::vector<std::int32_t>& pairs) {
  args::color(rank, color, noColor);
  pairs.assign(2 * static_cast<std::size_t>(size), 0);
  pairs[2 * static_cast<std::size_t>(rank)] = color;
  pairs[2 * static_cast<std::size_t>(rank) + 1] = key;
  Prepared p(Op::Split);
  p.call.bytes = 2 * sizeof(std::int32_t);
  p.in = p.out = pairs.data();
  return p;
}

}  // namespace coll
}  // namespace detail
}  // namespace tether
