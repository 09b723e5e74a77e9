// tether/testing/in_process_bootstrap.hpp — tether::Bootstrap over threads.
//
// One object per rank per communicator; made by tether::testing::InProcessWorld
// (in_process.hpp). Same contract, matching and errors as TcpBootstrap, from the
// same code (tether/detail/: argument checks and call building, algorithm
// choice and plans, the plan executor, full-key matching, collective ids and
// failure policies, split membership, the call table and the sequence
// guard); what is here is the in-memory transport under them: each call a
// run (detail/run.hpp), a request a run's handle (detail/requests.hpp).
// Header-only, C++17.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tether/bootstrap.hpp"
#include "tether/detail/args.hpp"
#include "tether/detail/core/call_slot.hpp"
#include "tether/detail/coll/execute.hpp"
#include "tether/detail/coll/front.hpp"
#include "tether/detail/coll/settings.hpp"
#include "tether/detail/coll/table.hpp"
#include "tether/detail/core/collective_calls.hpp"
#include "tether/detail/core/deadlines.hpp"
#include "tether/detail/core/nodes.hpp"
#include "tether/error.hpp"
#include "tether/request.hpp"
#include "tether/testing/detail/run.hpp"
#include "tether/testing/detail/endpoint.hpp"
#include "tether/testing/detail/requests.hpp"

namespace tether {
namespace testing {

class InProcessBootstrap : public Bootstrap, public std::enable_shared_from_this<InProcessBootstrap> {
 public:
  InProcessBootstrap(std::shared_ptr<detail::WorldState> world, std::uint64_t comm, std::vector<int> members, int rank,
                     std::chrono::milliseconds timeout)
      : endpoint_(std::move(world), detail::Group{comm, rank, std::move(members)}, timeout) {}
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
    tether::detail::args::payload(rank(), "send", bytes, endpoint_.world()->maxPayload);
    detail::Run run(endpoint_);
    startSend(run, data, bytes, peer, tag);
    waitFor(run);
  }

  void recv(void* data, std::size_t bytes, int peer, int tag) override {
    tether::detail::args::message(rank(), size(), "recv", data, bytes, peer, tag);
    tether::detail::args::payload(rank(), "recv", bytes, endpoint_.world()->maxPayload);
    detail::Run run(endpoint_);
    startRecv(run, data, bytes, peer, tag);
    waitFor(run);
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
    const std::vector<int> sorted = tether::detail::args::subset(rank(), size(), ranks);
    tether::detail::CallSlot::Scope scope(calling_, rank(), "subset barrier");
    // A subset is a communicator of its own, as over TCP: its own ids and sequence.
    const detail::Group group = endpoint_.group().subset(sorted);
    const std::uint64_t count = subsets_[sorted].take();  // each subset numbers its own barriers, as over TCP
    detail::Run run(endpoint_);
    Call call;
    call.op = Op::SubsetBarrier;
    tether::detail::coll::Choice choice;
    prepare(run, choice, call, group.rank, group.size(), nullptr, nullptr);
    begin(run, group.comm, count, call);
    launch(run, group.worldRanks, /*abortWorldOnFailure=*/false);
    waitFor(run);
  }

  // ---- nonblocking (tether/request.hpp; detail/requests.hpp) ----

  Request isend(const void* data, std::size_t bytes, int peer, int tag) override {
    tether::detail::args::message(rank(), size(), "isend", data, bytes, peer, tag);
    tether::detail::args::payload(rank(), "isend", bytes, endpoint_.world()->maxPayload);
    auto run = std::make_shared<detail::Run>(endpoint_);
    startSend(*run, data, bytes, peer, tag);
    return request(std::move(run), detail::RunHandle::Cancel::Never);
  }

  Request irecv(void* data, std::size_t bytes, int peer, int tag) override {
    tether::detail::args::message(rank(), size(), "irecv", data, bytes, peer, tag);
    tether::detail::args::payload(rank(), "irecv", bytes, endpoint_.world()->maxPayload);
    auto run = std::make_shared<detail::Run>(endpoint_);
    startRecv(*run, data, bytes, peer, tag);
    return request(std::move(run), detail::RunHandle::Cancel::Fail);
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
    detail::Group child = endpoint_.group().child(splitId, color, pairs);
    return std::make_shared<InProcessBootstrap>(endpoint_.world(), child.comm, std::move(child.worldRanks), child.rank,
                                                timeout());
  }

  void abort(const std::string& reason) override { endpoint_.world()->abortAll(endpoint_.worldRank(), reason); }

  void setTimeout(std::chrono::milliseconds timeout) override {
    endpoint_.setTimeout(
        tether::detail::core::communicatorTimeout(rank(), timeout, [&] { return endpoint_.world()->defaultTimeout; }));
  }
  std::chrono::milliseconds timeout() const override { return endpoint_.timeout(); }

 private:
  using Op = tether::detail::coll::Op;
  using Call = tether::detail::coll::Call;

  static const char* nameOf(Op op) { return tether::detail::coll::opName(op); }

  // A point-to-point message: delivered, or copied and held by its window.
  void startSend(detail::Run& run, const void* data, std::size_t bytes, int peer, int tag) {
    run.call = endpoint_.call(tether::detail::core::failures::sendName(peer, tag));
    run.steps.send(endpoint_.worldRankOf(peer), endpoint_.sendFrame(tag, bytes), data);
    run.start();
  }
  void startRecv(detail::Run& run, void* data, std::size_t bytes, int peer, int tag) {
    run.call = endpoint_.call(tether::detail::core::failures::recvName(peer, tag));
    run.steps.recv(endpoint_.recvKey(peer, tag), data, bytes);
    run.start();
  }
  // A blocking call waits for its run (to its deadline).
  static void waitFor(detail::Run& run) {
    if (auto e = run.wait(detail::Endpoint::Clock::time_point::max())) std::rethrow_exception(e);
  }
  Request request(std::shared_ptr<detail::Run> run, detail::RunHandle::Cancel cancel) {
    return Request(detail::runRequest(detail::RunHandle{owner(), &endpoint_, std::move(run), cancel}));
  }

  // The algorithm TcpBootstrap would choose for this call here (`choice`:
  // its communicator's, or a subset's), its plan recorded (or found) to
  // replay from `in` into `out`. Under the call slot.
  void prepare(detail::Run& run, tether::detail::coll::Choice& choice, const Call& call, int groupRank, int groupSize,
               const void* in, void* out) const {
    namespace dc = tether::detail::coll;
    // As in TcpBootstrap: a node runs more ranks of the world than it has cores.
    const bool cpuBound =
        endpoint_.world()->nranksPerNode > static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const auto settings = []() -> const dc::Settings& {
      static const dc::Settings loaded = dc::loadSettings();
      return loaded;
    };
    run.steps.collective(choice.of(settings, groupRank, groupSize, cpuBound, call), choice.shape, call, in, out);
  }

  // Numbers the call, runs its plan, and waits for it; a failure marks the
  // communicator unusable (launch). Returns the id.
  std::uint64_t collective(const tether::detail::coll::Prepared& prepared) {
    tether::detail::CallSlot::Scope scope(calling_, rank(), nameOf(prepared.call.op));
    detail::Run run(endpoint_);
    start(run, prepared);
    launch(run, endpoint_.group().worldRanks, /*abortWorldOnFailure=*/endpoint_.comm() == 0);
    waitFor(run);
    return run.call.coll;
  }

  // The nonblocking form: holds the call slot until the call has its id and
  // has started; it runs on as the peers' messages come (detail/run.hpp).
  Request startCollective(tether::detail::coll::Prepared prepared) {
    tether::detail::CallSlot::Scope scope(calling_, rank(), nameOf(prepared.call.op));
    auto run = std::make_shared<detail::Run>(endpoint_);
    start(*run, prepared);
    run->keep = std::move(prepared.keep);  // `in` may point into it (an in-place all-to-all); moved, not copied
    const bool world = endpoint_.comm() == 0;
    launch(*run, endpoint_.group().worldRanks, /*abortWorldOnFailure=*/world);
    return request(std::move(run),
                   world ? detail::RunHandle::Cancel::FailAndAbortWorld : detail::RunHandle::Cancel::Fail);
  }

  // Records its plan, takes its id, and its place in its communicator's
  // sequence (in id order, on the calling thread).
  void start(detail::Run& run, const tether::detail::coll::Prepared& prepared) {
    const Call& call = prepared.call;
    // Bad settings throw before an id is taken.
    prepare(run, choice_, call, rank(), size(), prepared.in, prepared.out);
    calls_.usable(endpoint_.who(), tether::detail::coll::callName(nameOf(call.op), calls_.next()), rank());
    begin(run, endpoint_.comm(), calls_.take(), call);
  }

  // Its id (on communicator `comm`), its name, and its place in the
  // communicator's sequence.
  void begin(detail::Run& run, std::uint64_t comm, std::uint64_t id, const Call& call) {
    run.call = endpoint_.collective(comm, id, call);
    calling_.rename(nameOf(call.op), id, comm);
    endpoint_.begin(run.call);
  }

  // Every collective (subset barriers too), as in TcpBootstrap: refused once
  // one has failed, or the world aborted; one that fails marks the
  // communicator broken and, on the world communicator, may abort the world
  // (tether/detail/core/collective_calls.hpp) — when it fails, whether or
  // not its caller waits. `group` maps plan ranks to world ranks.
  void launch(detail::Run& run, std::vector<int> group, bool abortWorldOnFailure) {
    calls_.usable(endpoint_.who(), run.call.where, rank());
    run.start(std::move(group), [this, abortWorldOnFailure](std::exception_ptr e) {
      try {
        std::rethrow_exception(e);
      } catch (const Error& error) {  // under the world mutex
        calls_.markBroken(error.what());  // any thread's (collective_calls.hpp)
        if (abortWorldOnFailure && tether::detail::core::failureAbortsWorld(error, size()))
          endpoint_.world()->abortAllLocked(endpoint_.worldRank(), error.what());
      } catch (...) {
      }
    });
  }

  // What keeps this bootstrap alive while a request runs (nothing when it
  // was not made by make_shared; its owner then keeps it).
  std::shared_ptr<const void> owner() const { return weak_from_this().lock(); }

  tether::detail::core::NodeView nodes() const {
    const detail::WorldState& world = *endpoint_.world();
    return tether::detail::core::nodeView(size(), rank(),
                                          [&](int r) { return world.nodeOf(endpoint_.worldRankOf(r)); });
  }

  detail::Endpoint endpoint_;
  // One collective call at a time (call_slot.hpp): the holder alone uses
  // the choice and the ids below (the broken record is any thread's).
  tether::detail::CallSlot calling_;
  tether::detail::coll::Choice choice_;  // its collectives' algorithm
  tether::detail::core::CollectiveCalls calls_;
  std::map<std::vector<int>, tether::detail::core::CollectiveCalls> subsets_;
};

}  // namespace testing
}  // namespace tether
