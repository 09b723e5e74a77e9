// What a collective algorithm sees: its group (ranks, communicator id), and
// three primitives — post a send, post a receive, wait for everything posted.
// Algorithms are coroutines on the progress thread, written as straight code.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/op.hpp"
#include "core/world.hpp"
#include "wire/frame.hpp"

namespace tether::coll {

struct Group {
  std::uint64_t comm = 0;
  int rank = 0;
  int size = 1;
  std::vector<int> worldRanks;  // group rank -> world rank
};

class Context {
 public:
  Context(World& world, Op& op, const Group& group) : world_(world), op_(op), group_(group) {}
  int rank() const { return group_.rank; }
  int size() const { return group_.size; }

  // `data` must stay valid until settle() returns (large payloads are not copied).
  void send(int peer, std::uint32_t step, const void* data, std::size_t bytes);
  void recv(int peer, std::uint32_t step, void* data, std::size_t bytes);
  boost::asio::awaitable<void> settle() { return world_.settle(op_); }

 private:
  World& world_;
  Op& op_;
  const Group& group_;
};

// Algorithms (one file each). Counts and displacements in bytes.
boost::asio::awaitable<void> allgatherBruck(Context& c, unsigned char* data, std::size_t bytes);
boost::asio::awaitable<void> allgatherRing(Context& c, unsigned char* data, std::size_t bytes);
boost::asio::awaitable<void> allgatherLinear(Context& c, unsigned char* data, std::size_t bytes);
boost::asio::awaitable<void> allgatherTree(Context& c, unsigned char* data, std::size_t bytes, int radix);
boost::asio::awaitable<void> alltoallv(Context& c, const unsigned char* send, const std::size_t* sendCounts,
                                       const std::size_t* sendDispls, unsigned char* recv,
                                       const std::size_t* recvCounts, const std::size_t* recvDispls,
                                       int window);
boost::asio::awaitable<void> broadcastBinomial(Context& c, unsigned char* data, std::size_t bytes, int root);
boost::asio::awaitable<void> broadcastPipeline(Context& c, unsigned char* data, std::size_t bytes, int root,
                                               std::size_t chunk);
boost::asio::awaitable<void> barrierDissemination(Context& c);
boost::asio::awaitable<void> barrierTree(Context& c, int radix);

}  // namespace tether::coll
