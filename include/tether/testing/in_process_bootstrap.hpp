// tether/testing/in_process_bootstrap.hpp — tether::Bootstrap over threads.
//
// One object per rank per communicator; made by tether::testing::InProcessWorld
// (in_process.hpp). Same contract, matching and errors as TcpBootstrap, without
// sockets: the same argument checks (tether/detail/args.hpp), the same
// algorithm choice and sources (tether/detail/coll/: each collective's plan is
// replayed here over in-process mailboxes), and messages matched under the
// full key (communicator, collective id or tag, step, source). Header-only, C++17.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "tether/bootstrap.hpp"
#include "tether/detail/args.hpp"
#include "tether/detail/call_slot.hpp"
#include "tether/detail/coll/settings.hpp"
#include "tether/detail/coll/table.hpp"
#include "tether/error.hpp"
#include "tether/testing/detail/endpoint.hpp"

namespace tether {
namespace testing {

class InProcessBootstrap : public Bootstrap {
 public:
  InProcessBootstrap(std::shared_ptr<detail::WorldState> world, std::uint64_t comm, std::vector<int> members, int rank,
                     std::chrono::milliseconds timeout)
      : endpoint_(std::move(world), comm, std::move(members), rank, timeout) {}

  int rank() const override { return endpoint_.rank(); }
  int size() const override { return endpoint_.size(); }
  int worldRank() const override { return endpoint_.worldRank(); }

  // Nodes: InProcessWorld's groups of nranksPerNode consecutive world ranks.
  int nranksPerNode() const override {
    const detail::WorldState& world = *endpoint_.world();
    const int myNode = world.nodeOf(endpoint_.worldRank());
    return static_cast<int>(std::count_if(endpoint_.members().begin(), endpoint_.members().end(),
                                          [&](int w) { return world.nodeOf(w) == myNode; }));
  }
  int localRank() const override {
    const detail::WorldState& world = *endpoint_.world();
    const int myNode = world.nodeOf(endpoint_.worldRank());
    return static_cast<int>(std::count_if(endpoint_.members().begin(), endpoint_.members().begin() + rank(),
                                          [&](int w) { return world.nodeOf(w) == myNode; }));
  }
  int nodeId() const override {
    return localNodes().at(static_cast<std::size_t>(endpoint_.world()->nodeOf(worldRank())));
  }
  int nnodes() const override { return static_cast<int>(localNodes().size()); }
  // "in-process:node<N>" and "in-process:node<N>:rank<W>" (world node and rank).
  std::string peerHost(int peer) const override {
    tether::detail::args::peer(rank(), size(), "peerHost", peer);
    return "in-process:node" + std::to_string(endpoint_.world()->nodeOf(endpoint_.worldRankOf(peer)));
  }
  std::string peerAddress(int peer) const override {
    return peerHost(peer) + ":rank" + std::to_string(endpoint_.worldRankOf(peer));
  }

  void send(const void* data, std::size_t bytes, int peer, int tag) override {
    tether::detail::args::peer(rank(), size(), "send", peer);
    tether::detail::args::tag(rank(), "send", tag);
    tether::detail::args::buffer(rank(), "send", data, bytes);
    const std::string where = "send to rank " + std::to_string(peer) + " tag " + std::to_string(tag);
    endpoint_.throwIfAborted(where);
    detail::ChannelKey key;
    key.channel = detail::Channel::PointToPoint;
    key.sequence = static_cast<std::uint64_t>(tag);
    detail::Message message;
    message.payload = copyOf(data, bytes);
    endpoint_.post(peer, key, std::move(message), where);
  }

  void recv(void* data, std::size_t bytes, int peer, int tag) override {
    tether::detail::args::peer(rank(), size(), "recv", peer);
    tether::detail::args::tag(rank(), "recv", tag);
    tether::detail::args::buffer(rank(), "recv", data, bytes);
    const std::string where = "recv from rank " + std::to_string(peer) + " tag " + std::to_string(tag);
    endpoint_.throwIfAborted(where);
    endpoint_.receivePointToPoint(data, bytes, peer, tag, where);
  }

  void allgather(void* allData, std::size_t bytesPerRank) override {
    tether::detail::args::allgather(rank(), size(), "allgather", allData, bytesPerRank);
    Call call;
    call.op = Op::Allgather;
    call.bytes = bytesPerRank;
    collective(call, allData, allData);
  }

  void alltoall(const void* sendData, void* recvData, std::size_t bytesPerRank) override {
    tether::detail::args::alltoall(rank(), size(), sendData, recvData, bytesPerRank);
    const auto n = static_cast<std::size_t>(size());
    std::vector<std::size_t> counts(n, bytesPerRank), displs(n);
    for (std::size_t i = 0; i < n; ++i) displs[i] = i * bytesPerRank;
    std::vector<unsigned char> copy;  // in place: the blocks to send, before any is overwritten
    if (sendData == recvData && bytesPerRank) {
      copy = copyOf(sendData, n * bytesPerRank);
      sendData = copy.data();
    }
    Call call;
    call.op = Op::Alltoall;
    call.bytes = bytesPerRank;
    call.blocks = Blocks{counts.data(), displs.data(), counts.data(), displs.data()};
    collective(call, sendData, recvData);
  }

  void alltoallv(const void* sendData, const std::size_t* sendCounts, const std::size_t* sendDispls, void* recvData,
                 const std::size_t* recvCounts, const std::size_t* recvDispls) override {
    tether::detail::args::alltoallv(rank(), size(), sendData, sendCounts, sendDispls, recvData, recvCounts, recvDispls);
    Call call;
    call.op = Op::Alltoallv;
    for (int i = 0; i < size(); ++i) call.bytes = std::max({call.bytes, sendCounts[i], recvCounts[i]});
    call.blocks = Blocks{sendCounts, sendDispls, recvCounts, recvDispls};
    collective(call, sendData, recvData);
  }

  void broadcast(void* data, std::size_t bytes, int root) override {
    tether::detail::args::root(rank(), size(), root);
    tether::detail::args::buffer(rank(), "broadcast", data, bytes);
    Call call;
    call.op = Op::Broadcast;
    call.bytes = bytes;
    call.root = root;
    collective(call, data, data);
  }

  void barrier() override {
    Call call;
    call.op = Op::Barrier;
    collective(call, nullptr, nullptr);
  }

  void barrier(const std::vector<int>& ranks) override {
    const std::vector<int> group = tether::detail::args::subset(rank(), size(), ranks);
    tether::detail::CallSlot::Scope scope(calling_, rank(), "subset barrier");
    std::uint64_t groupId = group.size(), count;
    for (int r : group) groupId = detail::mix(groupId, static_cast<std::uint64_t>(r));
    {
      std::lock_guard<std::mutex> lock(stateMutex_);
      count = ++subsetBarriers_[group];
    }
    detail::OpStamp op;
    op.name = nameOf(Op::SubsetBarrier);
    op.id = count;
    calling_.rename(op.call());
    detail::ChannelKey key;
    key.channel = detail::Channel::SubsetBarrier;
    key.group = groupId;
    key.sequence = count;
    Call call;
    call.op = Op::SubsetBarrier;
    const int groupRank = static_cast<int>(std::find(group.begin(), group.end(), rank()) - group.begin());
    guarded(op.call(), /*abortWorldOnFailure=*/false,
            [&] { replay(record(call, groupRank, static_cast<int>(group.size())), group, op, key, nullptr, nullptr); });
  }

  std::shared_ptr<Bootstrap> split(int color, int key) override {
    tether::detail::args::color(rank(), color, kNoColor);
    std::vector<std::int32_t> all(2 * static_cast<std::size_t>(size()));
    all[2 * static_cast<std::size_t>(rank())] = color;
    all[2 * static_cast<std::size_t>(rank()) + 1] = key;
    Call call;
    call.op = Op::Split;
    call.bytes = 2 * sizeof(std::int32_t);
    const std::uint64_t splitId = collective(call, all.data(), all.data());
    if (color == kNoColor) return nullptr;

    std::vector<std::tuple<int, int>> order;  // (key, parent rank) of my color
    for (int p = 0; p < size(); ++p) {
      if (all[2 * static_cast<std::size_t>(p)] == color)
        order.emplace_back(all[2 * static_cast<std::size_t>(p) + 1], p);
    }
    std::sort(order.begin(), order.end());
    std::vector<int> members;
    int childRank = -1;
    for (const auto& entry : order) {
      if (std::get<1>(entry) == rank()) childRank = static_cast<int>(members.size());
      members.push_back(endpoint_.worldRankOf(std::get<1>(entry)));
    }
    const std::uint64_t childComm =
        detail::mix(detail::mix(endpoint_.comm(), splitId), static_cast<std::uint64_t>(color));
    return std::make_shared<InProcessBootstrap>(endpoint_.world(), childComm, std::move(members), childRank, timeout());
  }

  void abort(const std::string& reason) override { endpoint_.world()->abortAll(endpoint_.worldRank(), reason); }

  void setTimeout(std::chrono::milliseconds timeout) override {
    tether::detail::args::timeout(rank(), timeout);
    endpoint_.setTimeout(timeout.count() == 0 ? endpoint_.world()->defaultTimeout : timeout);
  }
  std::chrono::milliseconds timeout() const override { return endpoint_.timeout(); }

 private:
  using Deadline = detail::Endpoint::Clock::time_point;
  using Op = tether::detail::coll::Op;
  using Call = tether::detail::coll::Call;
  using Blocks = tether::detail::coll::Blocks;
  using Plan = tether::detail::coll::Plan;
  using Step = tether::detail::coll::Step;

  static const char* nameOf(Op op) { return tether::detail::coll::opName(op); }

  // The algorithm TcpBootstrap would choose for this call here, recorded.
  Plan record(const Call& call, int groupRank, int groupSize) const {
    namespace dc = tether::detail::coll;
    static const dc::Settings settings = dc::loadSettings();
    dc::Shape shape = settings.tuning;
    shape.rank = groupRank;
    shape.size = groupSize;
    // As in TcpBootstrap: a node runs more ranks of the world than it has cores.
    shape.cpuBound =
        endpoint_.world()->nranksPerNode > static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    return dc::record(*dc::choose(shape, call, settings.forcedFor(call.op)), shape, call);
  }

  // Numbers the call, replays its plan, and marks the communicator unusable
  // if it fails (the ranks no longer agree on where they are). Returns the id.
  std::uint64_t collective(const Call& call, const void* in, void* out) {
    tether::detail::CallSlot::Scope scope(calling_, rank(), nameOf(call.op));
    detail::OpStamp op;
    op.name = nameOf(call.op);
    op.root = call.op == Op::Broadcast ? call.root : -1;
    Plan plan = record(call, rank(), size());  // bad settings throw before an id is taken
    {
      std::lock_guard<std::mutex> lock(stateMutex_);
      op.id = nextCollectiveId_++;
    }
    calling_.rename(op.call());
    detail::ChannelKey key;
    key.channel = detail::Channel::Collective;
    key.sequence = op.id;
    guarded(op.call(), /*abortWorldOnFailure=*/endpoint_.comm() == 0,
            [&] { replay(std::move(plan), allRanks(), op, key, in, out); });
    return op.id;
  }

  // Runs a plan: sends are posted (copied) at once, receives are taken at
  // each settle, in order; `group` maps plan ranks to communicator ranks.
  void replay(Plan plan, const std::vector<int>& group, const detail::OpStamp& op, detail::ChannelKey key,
              const void* in, void* out) {
    const Deadline until = endpoint_.deadline();
    std::vector<unsigned char> scratch(plan.scratchBytes());
    const tether::detail::coll::Memory mem{static_cast<const unsigned char*>(in), static_cast<unsigned char*>(out),
                                           scratch.data()};
    std::vector<Step> pending;
    for (const Step& s : plan.steps()) {
      switch (s.kind) {
        case Step::Kind::Send: {
          detail::Message message;
          message.op = op;
          message.step = s.step;
          message.payload = copyOf(mem.at(s.at), s.bytes);
          key.step = s.step;
          endpoint_.post(group[static_cast<std::size_t>(s.peer)], key, std::move(message), op.call());
          break;
        }
        case Step::Kind::Recv:
          pending.push_back(s);
          break;
        case Step::Kind::Copy:
        case Step::Kind::CopyBlocks:
          mem.copy(s);
          break;
        case Step::Kind::Settle:
          for (const Step& r : pending) {
            key.step = r.step;
            copyInto(mem.at(r.at),
                     endpoint_.receiveCollective(key, op, group[static_cast<std::size_t>(r.peer)], r.bytes, until));
          }
          pending.clear();
          break;
      }
    }
    endpoint_.rejectLeftovers(key, op);
  }

  // Every collective (subset barriers too), as in TcpBootstrap: refused with
  // Protocol once one has failed; a failure marks the communicator broken.
  template <class Body>
  void guarded(const std::string& where, bool abortWorldOnFailure, Body body) {
    std::string broken;
    {
      std::lock_guard<std::mutex> lock(stateMutex_);
      broken = brokenBy_;
    }
    if (!broken.empty()) {
      endpoint_.fail(ErrorCode::Protocol, where, -1,
                     "communicator unusable after an earlier collective failed: " + broken);
    }
    endpoint_.throwIfAborted(where);
    try {
      body();
    } catch (const Error& error) {
      {
        std::lock_guard<std::mutex> lock(stateMutex_);
        if (brokenBy_.empty()) brokenBy_ = error.what();
      }
      if (abortWorldOnFailure) abortIfFatal(error);
      throw;
    }
  }

  // Like TcpBootstrap: a collective of the world communicator that failed here
  // leaves every other rank waiting for steps this rank will never send, so
  // the world is aborted with the error as reason. Child communicators and
  // subset barriers must not stop ranks outside them; p2p concerns two ranks.
  void abortIfFatal(const Error& error) {
    const ErrorCode code = error.code();
    if (code == ErrorCode::Protocol || code == ErrorCode::Timeout || code == ErrorCode::PeerLost) {
      endpoint_.world()->abortAll(endpoint_.worldRank(), error.what());
    }
  }

  // World node -> this communicator's node number (by lowest rank here).
  std::map<int, int> localNodes() const {
    std::map<int, int> nodes;
    for (int w : endpoint_.members()) nodes.emplace(endpoint_.world()->nodeOf(w), static_cast<int>(nodes.size()));
    return nodes;
  }

  std::vector<int> allRanks() const {
    std::vector<int> ranks(static_cast<std::size_t>(size()));
    for (int r = 0; r < size(); ++r) ranks[static_cast<std::size_t>(r)] = r;
    return ranks;
  }

  static std::vector<unsigned char> copyOf(const void* data, std::size_t bytes) {
    auto* begin = static_cast<const unsigned char*>(data);
    return bytes == 0 ? std::vector<unsigned char>() : std::vector<unsigned char>(begin, begin + bytes);
  }
  static void copyInto(void* destination, const std::vector<unsigned char>& payload) {
    if (!payload.empty()) std::memcpy(destination, payload.data(), payload.size());
  }

  detail::Endpoint endpoint_;
  tether::detail::CallSlot calling_;  // one collective call at a time (call_slot.hpp)
  std::mutex stateMutex_;             // guards the counters below
  std::uint64_t nextCollectiveId_ = 1;
  std::string brokenBy_;  // first failed collective's message; empty while usable
  std::map<std::vector<int>, std::uint64_t> subsetBarriers_;
};

}  // namespace testing
}  // namespace tether
