// tether/testing/in_process_bootstrap.hpp — tether::Bootstrap over threads.
//
// One object per rank per communicator; made by tether::testing::InProcessWorld
// (in_process.hpp). Same contract, matching and errors as TcpBootstrap, without
// sockets: messages are copied into the receiving rank's mailbox under the full
// key (communicator, collective id / tag, step, source). Header-only, C++17.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tether/bootstrap.hpp"
#include "tether/error.hpp"
#include "tether/testing/detail/endpoint.hpp"

namespace tether {
namespace testing {

class InProcessBootstrap : public Bootstrap {
 public:
  InProcessBootstrap(std::shared_ptr<detail::WorldState> world, std::uint64_t comm,
                     std::vector<int> members, int rank, std::chrono::milliseconds timeout)
      : endpoint_(std::move(world), comm, std::move(members), rank, timeout) {}

  int rank() const override { return endpoint_.rank(); }
  int size() const override { return endpoint_.size(); }
  int worldRank() const { return endpoint_.worldRank(); }

  int nranksPerNode() const override {
    const detail::WorldState& world = *endpoint_.world();
    const int myNode = world.nodeOf(endpoint_.worldRank());
    return static_cast<int>(std::count_if(endpoint_.members().begin(), endpoint_.members().end(),
                                          [&](int w) { return world.nodeOf(w) == myNode; }));
  }

  void send(const void* data, std::size_t bytes, int peer, int tag) override {
    const std::string where = "send(tag " + std::to_string(tag) + ") to peer " + std::to_string(peer);
    endpoint_.throwIfAborted(where);
    checkPeer(where, peer);
    checkTag(where, tag, peer);
    checkBuffer(where, data, bytes, peer);
    detail::ChannelKey key;
    key.channel = detail::Channel::PointToPoint;
    key.sequence = static_cast<std::uint64_t>(tag);
    detail::Message message;
    message.payload = copyOf(data, bytes);
    endpoint_.post(peer, key, std::move(message), where);
  }

  void recv(void* data, std::size_t bytes, int peer, int tag) override {
    const std::string where = "recv(tag " + std::to_string(tag) + ") from peer " + std::to_string(peer);
    endpoint_.throwIfAborted(where);
    checkPeer(where, peer);
    checkTag(where, tag, peer);
    checkBuffer(where, data, bytes, peer);
    endpoint_.receivePointToPoint(data, bytes, peer, tag, where);
  }

  void allgather(void* allData, std::size_t bytesPerRank) override {
    checkBuffer("allgather", allData, bytesPerRank, -1);
    auto* blocks = static_cast<unsigned char*>(allData);
    collective("allgather", -1, bytesPerRank, [&](const detail::OpStamp& op, Deadline until) {
      const unsigned char* mine = blocks + static_cast<std::size_t>(rank()) * bytesPerRank;
      for (int p : others()) postCollective(p, op, 0, mine, bytesPerRank);
      for (int p : others()) {
        auto payload = takeCollective(op, 0, p, bytesPerRank, until);
        copyInto(blocks + static_cast<std::size_t>(p) * bytesPerRank, payload);
      }
    });
  }

  void alltoall(const void* sendData, void* recvData, std::size_t bytesPerRank) override {
    const std::size_t total = bytesPerRank * static_cast<std::size_t>(size());
    checkBuffer("alltoall", sendData, total, -1);
    checkBuffer("alltoall", recvData, total, -1);
    checkDisjoint("alltoall", sendData, total, recvData, total);
    auto* in = static_cast<const unsigned char*>(sendData);
    auto* out = static_cast<unsigned char*>(recvData);
    collective("alltoall", -1, bytesPerRank, [&](const detail::OpStamp& op, Deadline until) {
      for (int p : others()) postCollective(p, op, 0, in + p * bytesPerRank, bytesPerRank);
      if (bytesPerRank != 0) std::memcpy(out + rank() * bytesPerRank, in + rank() * bytesPerRank, bytesPerRank);
      for (int p : others()) copyInto(out + p * bytesPerRank, takeCollective(op, 0, p, bytesPerRank, until));
    });
  }

  void alltoallv(const void* sendData, const std::size_t* sendCounts,
                 const std::size_t* sendDispls, void* recvData, const std::size_t* recvCounts,
                 const std::size_t* recvDispls) override {
    const char* name = "alltoallv";
    if (!sendCounts || !sendDispls || !recvCounts || !recvDispls) {
      endpoint_.fail(ErrorCode::InvalidArgument, name, -1, "null counts or displacements");
    }
    std::size_t sendExtent = 0, recvExtent = 0;
    for (int p = 0; p < size(); ++p) {
      if (sendCounts[p] != 0) sendExtent = std::max(sendExtent, sendDispls[p] + sendCounts[p]);
      if (recvCounts[p] != 0) recvExtent = std::max(recvExtent, recvDispls[p] + recvCounts[p]);
    }
    checkBuffer(name, sendData, sendExtent, -1);
    checkBuffer(name, recvData, recvExtent, -1);
    checkDisjoint(name, sendData, sendExtent, recvData, recvExtent);
    const std::size_t self = static_cast<std::size_t>(rank());
    if (sendCounts[self] != recvCounts[self]) {
      endpoint_.fail(ErrorCode::InvalidArgument, name, rank(),
                     "sends " + std::to_string(sendCounts[self]) + " bytes to itself but expects " +
                         std::to_string(recvCounts[self]));
    }
    auto* in = static_cast<const unsigned char*>(sendData);
    auto* out = static_cast<unsigned char*>(recvData);
    collective(name, -1, 0, [&](const detail::OpStamp& op, Deadline until) {
      for (int p : others()) {
        detail::OpStamp stamp = perPair(op, sendCounts[p]);
        postCollective(p, stamp, 0, in + sendDispls[p], sendCounts[p]);
      }
      if (sendCounts[self] != 0) std::memcpy(out + recvDispls[self], in + sendDispls[self], sendCounts[self]);
      for (int p : others()) {
        detail::OpStamp expected = perPair(op, recvCounts[p]);
        copyInto(out + recvDispls[p], takeCollective(expected, 0, p, recvCounts[p], until));
      }
    });
  }

  void broadcast(void* data, std::size_t bytes, int root) override {
    const std::string where = "broadcast(root " + std::to_string(root) + ")";
    if (root < 0 || root >= size()) {
      endpoint_.fail(ErrorCode::InvalidArgument, where, root,
                     "root out of range (size " + std::to_string(size()) + ")");
    }
    checkBuffer(where, data, bytes, -1);
    auto* buffer = static_cast<unsigned char*>(data);
    collective("broadcast", root, bytes, [&](const detail::OpStamp& op, Deadline until) {
      if (rank() == root) {
        for (int p : others()) postCollective(p, op, 0, buffer, bytes);
      } else {
        copyInto(buffer, takeCollective(op, 0, root, bytes, until));
      }
    });
  }

  void barrier() override {
    collective("barrier", -1, 0, [&](const detail::OpStamp& op, Deadline until) {
      for (int p : others()) postCollective(p, op, 0, nullptr, 0);
      for (int p : others()) takeCollective(op, 0, p, 0, until);
    });
  }

  void barrier(const std::vector<int>& ranks) override {
    std::vector<int> group = checkedSubset(ranks);
    std::string name = "barrier{";
    std::uint64_t groupId = group.size();
    for (std::size_t i = 0; i < group.size(); ++i) {
      name += (i ? "," : "") + std::to_string(group[i]);
      groupId = detail::mix(groupId, static_cast<std::uint64_t>(group[i]));
    }
    name += "}";
    std::uint64_t count;
    {
      std::lock_guard<std::mutex> lock(stateMutex_);
      count = ++subsetBarriers_[group];
    }
    detail::OpStamp op;
    op.name = name;
    op.id = count;
    endpoint_.throwIfAborted(name + "#" + std::to_string(count));
    detail::ChannelKey key;
    key.channel = detail::Channel::SubsetBarrier;
    key.group = groupId;
    key.sequence = count;
    const auto until = endpoint_.deadline();
    for (int p : group) {
      if (p != rank()) endpoint_.post(p, key, stamped(op, 0, nullptr, 0), describe(op, p, "to"));
    }
    for (int p : group) {
      if (p != rank()) endpoint_.receiveCollective(key, op, 0, p, 0, until);
    }
  }

  std::shared_ptr<Bootstrap> split(int color, int key) override {
    if (color < 0 && color != kNoColor) {
      endpoint_.fail(ErrorCode::InvalidArgument, "split", -1,
                     "color " + std::to_string(color) + " is negative and not kNoColor");
    }
    std::vector<std::int32_t> all(2 * static_cast<std::size_t>(size()));
    std::uint64_t splitId = 0;
    collective("split", -1, 2 * sizeof(std::int32_t), [&](const detail::OpStamp& op, Deadline until) {
      splitId = op.id;
      const std::int32_t mine[2] = {color, key};
      for (int p : others()) postCollective(p, op, 0, mine, sizeof mine);
      std::memcpy(&all[2 * static_cast<std::size_t>(rank())], mine, sizeof mine);
      for (int p : others()) copyInto(&all[2 * static_cast<std::size_t>(p)], takeCollective(op, 0, p, sizeof mine, until));
    });
    if (color == kNoColor) return nullptr;

    std::vector<std::tuple<int, int>> order;  // (key, parent rank) of my color
    for (int p = 0; p < size(); ++p) {
      if (all[2 * static_cast<std::size_t>(p)] == color) order.emplace_back(all[2 * static_cast<std::size_t>(p) + 1], p);
    }
    std::sort(order.begin(), order.end());
    std::vector<int> members;
    int childRank = -1;
    for (const auto& entry : order) {
      if (std::get<1>(entry) == rank()) childRank = static_cast<int>(members.size());
      members.push_back(endpoint_.worldRankOf(std::get<1>(entry)));
    }
    const std::uint64_t childComm = detail::mix(detail::mix(endpoint_.comm(), splitId),
                                                static_cast<std::uint64_t>(color));
    return std::make_shared<InProcessBootstrap>(endpoint_.world(), childComm, std::move(members),
                                                childRank, timeout());
  }

  void abort(const std::string& reason) override {
    endpoint_.world()->abortAll(endpoint_.worldRank(), reason);
  }

  void setTimeout(std::chrono::milliseconds timeout) override {
    if (timeout.count() < 0) {
      endpoint_.fail(ErrorCode::InvalidArgument, "setTimeout", -1, "negative timeout");
    }
    endpoint_.setTimeout(timeout);
  }
  std::chrono::milliseconds timeout() const override { return endpoint_.timeout(); }

 private:
  using Deadline = detail::Endpoint::Clock::time_point;

  // Numbers the call, runs it, and marks the communicator unusable if it fails
  // (the ranks no longer agree on where they are).
  template <class Body>
  void collective(const char* name, int root, std::size_t bytes, Body body) {
    detail::OpStamp op;
    op.name = name;
    op.root = root;
    op.bytes = bytes;
    op.perPairBytes = op.name == "alltoallv";
    std::string broken;
    {
      std::lock_guard<std::mutex> lock(stateMutex_);
      op.id = nextCollectiveId_++;
      broken = brokenBy_;
    }
    const std::string where = op.name + "#" + std::to_string(op.id);
    endpoint_.throwIfAborted(where);
    if (!broken.empty()) {
      endpoint_.fail(brokenCode_, where, -1, "communicator unusable after an earlier failed collective (" + broken + ")");
    }
    try {
      body(op, endpoint_.deadline());
      detail::ChannelKey key;
      key.channel = detail::Channel::Collective;
      key.sequence = op.id;
      endpoint_.rejectForeignCalls(key, op);
    } catch (const Error& error) {
      std::lock_guard<std::mutex> lock(stateMutex_);
      if (brokenBy_.empty()) {
        brokenBy_ = error.what();
        brokenCode_ = error.code();
      }
      throw;
    }
  }

  static detail::OpStamp perPair(detail::OpStamp op, std::size_t bytes) {
    op.bytes = bytes;
    return op;
  }

  static detail::Message stamped(const detail::OpStamp& op, int step, const void* data, std::size_t bytes) {
    detail::Message message;
    message.op = op;
    message.step = step;
    message.payload = copyOf(data, bytes);
    return message;
  }

  void postCollective(int peer, const detail::OpStamp& op, int step, const void* data, std::size_t bytes) {
    detail::ChannelKey key;
    key.channel = detail::Channel::Collective;
    key.sequence = op.id;
    endpoint_.post(peer, key, stamped(op, step, data, bytes), describe(op, peer, "to"));
  }

  std::vector<unsigned char> takeCollective(const detail::OpStamp& op, int step, int peer,
                                            std::size_t bytes, Deadline until) {
    detail::ChannelKey key;
    key.channel = detail::Channel::Collective;
    key.sequence = op.id;
    return endpoint_.receiveCollective(key, op, step, peer, bytes, until);
  }

  static std::string describe(const detail::OpStamp& op, int peer, const char* direction) {
    return op.name + "#" + std::to_string(op.id) + " " + direction + " peer " + std::to_string(peer);
  }

  // Peers in the order rank+1, rank+2, ... (wrapping), so ranks do not all
  // wait on rank 0 first.
  std::vector<int> others() const {
    std::vector<int> peers;
    for (int i = 1; i < size(); ++i) peers.push_back((rank() + i) % size());
    return peers;
  }

  static std::vector<unsigned char> copyOf(const void* data, std::size_t bytes) {
    auto* begin = static_cast<const unsigned char*>(data);
    return bytes == 0 ? std::vector<unsigned char>() : std::vector<unsigned char>(begin, begin + bytes);
  }
  static void copyInto(void* destination, const std::vector<unsigned char>& payload) {
    if (!payload.empty()) std::memcpy(destination, payload.data(), payload.size());
  }

  void checkPeer(const std::string& where, int peer) const {
    if (peer < 0 || peer >= size()) {
      endpoint_.fail(ErrorCode::InvalidArgument, where, peer,
                     "peer out of range (size " + std::to_string(size()) + ")");
    }
  }
  void checkTag(const std::string& where, int tag, int peer) const {
    if (tag < 0) endpoint_.fail(ErrorCode::InvalidArgument, where, peer, "negative tag");
  }
  void checkBuffer(const std::string& where, const void* data, std::size_t bytes, int peer) const {
    if (data == nullptr && bytes > 0) {
      endpoint_.fail(ErrorCode::InvalidArgument, where, peer,
                     "null buffer with " + std::to_string(bytes) + " bytes");
    }
  }
  void checkDisjoint(const std::string& where, const void* a, std::size_t aBytes, const void* b,
                     std::size_t bBytes) const {
    if (aBytes == 0 || bBytes == 0) return;
    auto x = reinterpret_cast<std::uintptr_t>(a), y = reinterpret_cast<std::uintptr_t>(b);
    if (x < y + bBytes && y < x + aBytes) {
      endpoint_.fail(ErrorCode::InvalidArgument, where, -1, "send and receive buffers overlap");
    }
  }
  std::vector<int> checkedSubset(const std::vector<int>& ranks) const {
    const std::string where = "barrier(subset)";
    std::vector<int> group = ranks;
    std::sort(group.begin(), group.end());
    for (std::size_t i = 0; i < group.size(); ++i) {
      if (group[i] < 0 || group[i] >= size()) {
        endpoint_.fail(ErrorCode::InvalidArgument, where, group[i],
                       "rank " + std::to_string(group[i]) + " out of range (size " + std::to_string(size()) + ")");
      }
      if (i > 0 && group[i] == group[i - 1]) {
        endpoint_.fail(ErrorCode::InvalidArgument, where, group[i], "rank " + std::to_string(group[i]) + " listed twice");
      }
    }
    if (!std::binary_search(group.begin(), group.end(), rank())) {
      endpoint_.fail(ErrorCode::InvalidArgument, where, -1, "the list does not contain the caller");
    }
    return group;
  }

  detail::Endpoint endpoint_;
  std::mutex stateMutex_;  // guards the counters below
  std::uint64_t nextCollectiveId_ = 1;
  std::string brokenBy_;  // first failed collective's message; empty while usable
  ErrorCode brokenCode_ = ErrorCode::Protocol;
  std::map<std::vector<int>, std::uint64_t> subsetBarriers_;
};

}  // namespace testing
}  // namespace tether
