// tether/testing/in_process_bootstrap.hpp — tether::Bootstrap over threads.
//
// One object per rank per communicator; made by tether::testing::InProcessWorld
// (in_process.hpp). Same contract, matching and errors as TcpBootstrap, from the
// same code (tether/detail/: argument checks and call building, algorithm
// choice and plans, the plan executor, full-key matching, collective ids and
// failure policies, split membership); what is here is the in-memory
// transport under them, and the nonblocking calls (detail/requests.hpp).
// Header-only, C++17.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tether/bootstrap.hpp"
#include "tether/detail/args.hpp"
#include "tether/detail/call_slot.hpp"
#include "tether/detail/coll/execute.hpp"
#include "tether/detail/coll/front.hpp"
#include "tether/detail/coll/settings.hpp"
#include "tether/detail/coll/table.hpp"
#include "tether/detail/core/collective_calls.hpp"
#include "tether/detail/core/deadlines.hpp"
#include "tether/detail/core/nodes.hpp"
#include "tether/detail/core/split.hpp"
#include "tether/error.hpp"
#include "tether/request.hpp"
#include "tether/testing/detail/endpoint.hpp"
#include "tether/testing/detail/requests.hpp"

namespace tether {
namespace testing {

class InProcessBootstrap : public Bootstrap, public std::enable_shared_from_this<InProcessBootstrap> {
 public:
  InProcessBootstrap(std::shared_ptr<detail::WorldState> world, std::uint64_t comm, std::vector<int> members, int rank,
                     std::chrono::milliseconds timeout)
      : endpoint_(std::move(world), comm, std::move(members), rank, timeout) {
    if (comm != 0) endpoint_.world()->joinComm(comm);
  }
  ~InProcessBootstrap() override {
    if (endpoint_.comm() != 0) endpoint_.world()->leaveComm(endpoint_.comm());
  }
  InProcessBootstrap(const InProcessBootstrap&) = delete;
  InProcessBootstrap& operator=(const InProcessBootstrap&) = delete;

  int rank() const override { return endpoint_.rank(); }
  int size() const override { return endpoint_.size(); }
  int worldRank() const override { return endpoint_.worldRank(); }

  // Nodes: InProcessWorld's groups of nranksPerNode consecutive world ranks
  // (tether/detail/core/nodes.hpp).
  int nranksPerNode() const override { return nodes().ranksPerNode; }
  int localRank() const override { return nodes().localRank; }
  int nodeId() const override { return nodes().nodeId; }
  int nnodes() const override { return nodes().nnodes; }
  // "in-process:node<N>" and "in-process:node<N>:rank<W>" (world node and rank).
  std::string peerHost(int peer) const override {
    tether::detail::args::peer(rank(), size(), "peerHost", peer);
    return "in-process:node" + std::to_string(endpoint_.world()->nodeOf(endpoint_.worldRankOf(peer)));
  }
  std::string peerAddress(int peer) const override {
    return peerHost(peer) + ":rank" + std::to_string(endpoint_.worldRankOf(peer));
  }

  // Buffered, as over TCP: returns once the message is in the peer's
  // mailbox; past its window (TETHER_P2P_WINDOW_BYTES of this rank's messages
  // the peer has not received), once the peer has received enough of them.
  void send(const void* data, std::size_t bytes, int peer, int tag) override {
    tether::detail::args::message(rank(), size(), "send", data, bytes, peer, tag);
    const auto until = endpoint_.deadline();
    const std::string where = sendName(peer, tag);
    endpoint_.waitSent(postMessage(data, bytes, peer, tag, where), until, where, nullptr);
  }

  void recv(void* data, std::size_t bytes, int peer, int tag) override {
    tether::detail::args::message(rank(), size(), "recv", data, bytes, peer, tag);
    const auto until = endpoint_.deadline();
    detail::Call call = endpoint_.call(tether::detail::core::failures::recvName(peer, tag));
    endpoint_.post(call, endpoint_.pointToPoint(peer, tag), data, bytes);
    endpoint_.settle(call, until, nullptr);
  }

  void allgather(void* allData, std::size_t bytesPerRank) override {
    collective(tether::detail::coll::allgatherCall(rank(), size(), "allgather", allData, bytesPerRank));
  }

  void alltoall(const void* sendData, void* recvData, std::size_t bytesPerRank) override {
    collective(tether::detail::coll::alltoallCall(rank(), size(), "alltoall", sendData, recvData, bytesPerRank));
  }

  void alltoallv(const void* sendData, const std::size_t* sendCounts, const std::size_t* sendDispls, void* recvData,
                 const std::size_t* recvCounts, const std::size_t* recvDispls) override {
    collective(tether::detail::coll::alltoallvCall(rank(), size(), sendData, sendCounts, sendDispls, recvData,
                                                   recvCounts, recvDispls));
  }

  void broadcast(void* data, std::size_t bytes, int root) override {
    collective(tether::detail::coll::broadcastCall(rank(), size(), data, bytes, root));
  }

  void barrier() override { collective(tether::detail::coll::barrierCall()); }

  void barrier(const std::vector<int>& ranks) override {
    const std::vector<int> group = tether::detail::args::subset(rank(), size(), ranks);
    tether::detail::CallSlot::Scope scope(calling_, rank(), "subset barrier");
    // A subset is a communicator of its own, as over TCP: its own ids and sequence.
    std::uint64_t subsetComm = detail::mix(endpoint_.comm(), group.size()), count;
    for (int r : group) subsetComm = detail::mix(subsetComm, static_cast<std::uint64_t>(r));
    {
      std::lock_guard<std::mutex> lock(stateMutex_);
      count = subsets_[group].take();  // each subset numbers its own barriers, as over TCP
    }
    Started started(endpoint_);
    Call call;
    call.op = Op::SubsetBarrier;
    const int groupRank = static_cast<int>(std::find(group.begin(), group.end(), rank()) - group.begin());
    started.plan = record(call, groupRank, static_cast<int>(group.size()));
    begin(started, subsetComm, count, call);
    guarded(started.call.where, /*abortWorldOnFailure=*/false,
            [&] { replay(started, group, nullptr, nullptr, nullptr); });
  }

  // ---- nonblocking (tether/request.hpp; detail/requests.hpp) ----

  Request isend(const void* data, std::size_t bytes, int peer, int tag) override {
    tether::detail::args::message(rank(), size(), "isend", data, bytes, peer, tag);
    const auto until = endpoint_.deadline();
    const std::string where = sendName(peer, tag);
    return Request(std::make_unique<detail::SentRequest>(owner(), endpoint_, where,
                                                         postMessage(data, bytes, peer, tag, where), until));
  }

  Request irecv(void* data, std::size_t bytes, int peer, int tag) override {
    tether::detail::args::message(rank(), size(), "irecv", data, bytes, peer, tag);
    return Request(std::make_unique<detail::RecvRequest>(owner(), endpoint_, data, bytes, peer, tag,
                                                         tether::detail::core::failures::recvName(peer, tag)));
  }

  Request iallgather(void* allData, std::size_t bytesPerRank) override {
    return startCollective(tether::detail::coll::allgatherCall(rank(), size(), "iallgather", allData, bytesPerRank));
  }

  Request ialltoall(const void* sendData, void* recvData, std::size_t bytesPerRank) override {
    return startCollective(
        tether::detail::coll::alltoallCall(rank(), size(), "ialltoall", sendData, recvData, bytesPerRank));
  }

  Request ibarrier() override { return startCollective(tether::detail::coll::barrierCall()); }

  std::shared_ptr<Bootstrap> split(int color, int key) override {
    std::vector<std::int32_t> pairs;
    const std::uint64_t splitId =
        collective(tether::detail::coll::splitCall(rank(), size(), color, key, kNoColor, pairs));
    if (color == kNoColor) return nullptr;
    const tether::detail::core::SplitMembers split = tether::detail::core::splitMembers(pairs, rank(), color);
    std::vector<int> members;
    for (int p : split.parentRanks) members.push_back(endpoint_.worldRankOf(p));
    const std::uint64_t childComm =
        detail::mix(detail::mix(endpoint_.comm(), splitId), static_cast<std::uint64_t>(color));
    return std::make_shared<InProcessBootstrap>(endpoint_.world(), childComm, std::move(members), split.rank,
                                                timeout());
  }

  void abort(const std::string& reason) override { endpoint_.world()->abortAll(endpoint_.worldRank(), reason); }

  void setTimeout(std::chrono::milliseconds timeout) override {
    endpoint_.setTimeout(
        tether::detail::core::communicatorTimeout(rank(), timeout, [&] { return endpoint_.world()->defaultTimeout; }));
  }
  std::chrono::milliseconds timeout() const override { return endpoint_.timeout(); }

 private:
  using Deadline = detail::Endpoint::Clock::time_point;
  using Op = tether::detail::coll::Op;
  using Call = tether::detail::coll::Call;
  using Plan = tether::detail::coll::Plan;

  static const char* nameOf(Op op) { return tether::detail::coll::opName(op); }
  static std::string sendName(int peer, int tag) { return tether::detail::core::failures::sendName(peer, tag); }

  // A point-to-point message: delivered, or copied and held by its window.
  detail::Endpoint::Sent postMessage(const void* data, std::size_t bytes, int peer, int tag, const std::string& where) {
    detail::Header header;
    header.key.comm = endpoint_.comm();
    header.key.channel = detail::Channel::PointToPoint;
    header.key.sequence = static_cast<std::uint64_t>(tag);
    header.length = bytes;
    return endpoint_.send(peer, std::move(header), data, where);
  }

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
  std::uint64_t collective(const tether::detail::coll::Prepared& prepared) {
    tether::detail::CallSlot::Scope scope(calling_, rank(), nameOf(prepared.call.op));
    Started started(endpoint_);
    start(started, prepared.call);
    run(started, prepared.in, prepared.out, nullptr);
    return started.key.sequence;
  }

  // The nonblocking form: holds the call slot until the call has its id,
  // then runs on a thread of its own (detail/requests.hpp).
  Request startCollective(tether::detail::coll::Prepared prepared) {
    tether::detail::CallSlot::Scope scope(calling_, rank(), nameOf(prepared.call.op));
    auto started = std::make_shared<Started>(endpoint_);
    start(*started, prepared.call);
    const void* in = prepared.in;
    void* out = prepared.out;
    return Request(std::make_unique<detail::CollectiveRequest>(
        owner(), endpoint_, started->call.where, /*abortWorldOnCancel=*/endpoint_.comm() == 0, std::move(prepared.keep),
        [this, started, in, out](const detail::Interrupt* interrupt) { run(*started, in, out, interrupt); }));
  }

  // A collective with its id taken, its plan recorded, and its place in its
  // communicator's sequence, taken in id order on the calling thread (a
  // nonblocking one runs later, on a thread of its own); left when
  // destroyed, if its run did not end there.
  struct Started {
    explicit Started(const detail::Endpoint& endpoint) : endpoint(endpoint) {}
    ~Started() { endpoint.end(call, nullptr); }
    Started(const Started&) = delete;
    Started& operator=(const Started&) = delete;

    const detail::Endpoint& endpoint;
    Plan plan{0, 1};         // recorded when it starts
    detail::ChannelKey key;  // its call id: communicator, id, operation, root
    detail::Call call;       // its receives and its sequence entry point to it
  };

  void start(Started& started, const Call& call) {
    started.plan = record(call, rank(), size());  // bad settings throw before an id is taken
    std::uint64_t id;
    {
      std::lock_guard<std::mutex> lock(stateMutex_);
      calls_.usable(endpoint_.who(), tether::detail::coll::callName(nameOf(call.op), calls_.next()), rank());
      id = calls_.take();
    }
    begin(started, endpoint_.comm(), id, call);
  }

  // Its call id's key (communicator `comm`, `id`), its name, and its place
  // in the communicator's sequence.
  void begin(Started& started, std::uint64_t comm, std::uint64_t id, const Call& call) {
    started.key.comm = comm;
    started.key.channel = detail::Channel::Collective;
    started.key.sequence = id;
    started.key.code = static_cast<std::uint32_t>(call.op);
    started.key.root = call.op == Op::Broadcast ? call.root : -1;
    started.call = endpoint_.collective(started.key.call(), started.key);
    calling_.rename(started.call.where);
    endpoint_.begin(started.call);
  }

  // Replays a started collective; marks the communicator broken if it fails.
  void run(Started& started, const void* in, void* out, const detail::Interrupt* interrupt) {
    guarded(started.call.where, /*abortWorldOnFailure=*/endpoint_.comm() == 0,
            [&] { replay(started, allRanks(), in, out, interrupt); });
  }

  // What keeps this bootstrap alive while a request runs (nothing when it
  // was not made by make_shared; its owner then keeps it).
  std::shared_ptr<const void> owner() const { return weak_from_this().lock(); }

  // One call's view of the world, the executor's transport
  // (tether/detail/coll/execute.hpp): sends are delivered at once or held by
  // their window, receives are posted in the call table, and a round
  // settles once they are filled and its held sends delivered (as over TCP,
  // where a round ends when its sends are written); `group` maps plan ranks
  // to communicator ranks.
  class CallTransport {
   public:
    CallTransport(const detail::Endpoint& endpoint, const std::vector<int>& group, Started& started,
                  const detail::Interrupt* interrupt)
        : endpoint_(endpoint), group_(group), s_(started), until_(endpoint.deadline()), interrupt_(interrupt) {}

    void postSend(int peer, std::uint32_t step, const void* data, std::size_t bytes) {
      detail::Header header;
      header.key = s_.key;
      header.key.step = step;
      header.length = bytes;
      auto sent = endpoint_.send(group_[static_cast<std::size_t>(peer)], std::move(header), data, s_.call.where);
      if (sent.slot) held_.push_back(std::move(sent));
    }
    void postRecv(int peer, std::uint32_t step, void* data, std::size_t bytes) {
      detail::ChannelKey key = s_.key;
      key.step = step;
      key.source = group_[static_cast<std::size_t>(peer)];
      endpoint_.post(s_.call, key, data, bytes);
    }
    void settle() {
      endpoint_.settle(s_.call, until_, interrupt_);
      for (const detail::Endpoint::Sent& sent : held_) endpoint_.waitSent(sent, until_, s_.call.where, interrupt_);
      held_.clear();
    }
    ~CallTransport() {
      endpoint_.withdraw(s_.call);
      for (const detail::Endpoint::Sent& sent : held_) endpoint_.drop(sent);
    }
    CallTransport(const CallTransport&) = delete;
    CallTransport& operator=(const CallTransport&) = delete;

   private:
    const detail::Endpoint& endpoint_;
    const std::vector<int>& group_;
    Started& s_;  // its call: the call table points to it
    const Deadline until_;
    const detail::Interrupt* const interrupt_;  // a nonblocking call's, or nullptr
    std::vector<detail::Endpoint::Sent> held_;  // this round's sends past their window
  };

  // Replays a started call's plan; it ends in its communicator's sequence
  // (a message left at its id fails it).
  void replay(Started& started, const std::vector<int>& group, const void* in, void* out,
              const detail::Interrupt* interrupt) {
    std::exception_ptr error;
    try {
      CallTransport transport(endpoint_, group, started, interrupt);
      endpoint_.settled(started.call);  // throws what failed it when it began
      tether::detail::coll::Execution run(std::move(started.plan), in, out);
      while (run.next(transport)) transport.settle();
    } catch (...) {
      error = std::current_exception();
    }
    endpoint_.end(started.call, &error);
    if (error) std::rethrow_exception(error);
  }

  // Every collective (subset barriers too), as in TcpBootstrap: refused once
  // one has failed; a failure marks the communicator broken, and on the world
  // communicator may abort the world (tether/detail/core/collective_calls.hpp).
  template <class Body>
  void guarded(const std::string& where, bool abortWorldOnFailure, Body body) {
    {
      std::lock_guard<std::mutex> lock(stateMutex_);
      calls_.usable(endpoint_.who(), where, rank());
    }
    endpoint_.throwIfAborted(where);
    try {
      body();
    } catch (const Error& error) {
      {
        std::lock_guard<std::mutex> lock(stateMutex_);
        calls_.markBroken(error.what());
      }
      if (abortWorldOnFailure && tether::detail::core::failureAbortsWorld(error, size()))
        endpoint_.world()->abortAll(endpoint_.worldRank(), error.what());
      throw;
    }
  }

  tether::detail::core::NodeView nodes() const {
    const detail::WorldState& world = *endpoint_.world();
    return tether::detail::core::nodeView(size(), rank(),
                                          [&](int r) { return world.nodeOf(endpoint_.worldRankOf(r)); });
  }

  std::vector<int> allRanks() const {
    std::vector<int> ranks(static_cast<std::size_t>(size()));
    for (int r = 0; r < size(); ++r) ranks[static_cast<std::size_t>(r)] = r;
    return ranks;
  }

  detail::Endpoint endpoint_;
  tether::detail::CallSlot calling_;  // one collective call at a time (call_slot.hpp)
  std::mutex stateMutex_;             // guards the counters below
  tether::detail::core::CollectiveCalls calls_;
  std::map<std::vector<int>, tether::detail::core::CollectiveCalls> subsets_;
};

}  // namespace testing
}  // namespace tether
