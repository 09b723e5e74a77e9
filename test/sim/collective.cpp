#include "collective.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <stdexcept>
#include <unordered_map>

namespace tether::sim {
namespace {

constexpr std::uint64_t kEnter = 0;   // the call's entry cost is paid: record the plan and go
constexpr std::uint64_t kCopied = 1;  // local copies done: go on

// The full key of a frame at its receiver: (receiver, source, call, step).
struct Key {
  std::uint64_t ranks, position;
  bool operator==(const Key& o) const { return ranks == o.ranks && position == o.position; }
};
struct KeyHash {
  std::size_t operator()(const Key& k) const {
    return static_cast<std::size_t>((k.ranks * 0x9e3779b97f4a7c15ull) ^ (k.position + (k.position << 17)));
  }
};
Key keyOf(int rank, int src, std::uint32_t call, std::uint32_t step) {
  return Key{(static_cast<std::uint64_t>(static_cast<std::uint32_t>(rank)) << 32) | static_cast<std::uint32_t>(src),
             (static_cast<std::uint64_t>(call) << 32) | step};
}

class Run final : public Protocol {
 public:
  Run(Engine& engine, const CollectiveSpec& spec, const Planner& planner)
      : engine_(engine),
        spec_(spec),
        planner_(planner),
        ranks_(static_cast<std::size_t>(engine.simulated())),
        callMax_(static_cast<std::size_t>(std::max(1, spec.calls)), 0) {}

  void start() {
    t0_ = engine_.now();
    for (int r = 0; r < engine_.simulated(); ++r) startCall(r);
  }

  void delivered(int rank, const Message& m) override {
    RankRun& s = ranks_[static_cast<std::size_t>(rank)];
    const Key key = keyOf(rank, m.src, m.call, m.step);
    auto it = waiting_.find(key);
    if (it == waiting_.end()) {
      waiting_.emplace(key, m.depth + 1);  // before its receive: kept, as the mailbox does
      return;
    }
    if (it->second != 0)
      throw std::runtime_error(
          fmt::format("rank {}: two frames from rank {} for call {} step {}", rank, m.src, m.call, m.step));
    waiting_.erase(it);
    --s.pendingRecvs;
    s.newDepth = std::max(s.newDepth, m.depth);
    maybeResume(rank);
  }

  void sendLeft(int rank, const Message&) override {
    --ranks_[static_cast<std::size_t>(rank)].pendingSends;
    maybeResume(rank);
  }

  void linkUp(int, int) override {}

  void resumed(int rank, std::uint64_t token) override {
    RankRun& s = ranks_[static_cast<std::size_t>(rank)];
    if (token == kEnter) {
      s.steps = planner_.plan(rank).steps;  // recorded now, freed when the call returns
      s.pc = 0;
    }
    advance(rank);
  }

  // After the run: every rank returned from every call, no frame is left over.
  void check() const {
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      const RankRun& s = ranks_[r];
      if (!s.done)
        throw std::runtime_error(
            fmt::format("rank {} never finished: call {} at step {} of {}, waiting for {} receive(s) and {} send(s)", r,
                        s.call, s.pc, s.steps.size(), s.pendingRecvs, s.pendingSends));
    }
    if (!waiting_.empty()) {
      const Key& k = waiting_.begin()->first;
      throw std::runtime_error(
          fmt::format("{} frame(s) nobody received, e.g. at rank {} from rank {} (call {} step {})", waiting_.size(),
                      k.ranks >> 32, k.ranks & 0xffffffffu, k.position >> 32, k.position & 0xffffffffu));
    }
  }

  std::uint32_t rounds() const { return rounds_; }
  std::uint64_t mostCopied() const {
    std::uint64_t most = 0;
    for (const RankRun& s : ranks_) most = std::max(most, s.copiedTotal);
    return most;
  }
  const std::vector<Time>& callMax() const { return callMax_; }

 private:
  struct RankRun {
    std::vector<CStep> steps;
    std::uint32_t pc = 0, call = 0;
    std::uint32_t pendingRecvs = 0, pendingSends = 0;
    std::uint32_t depth = 0;        // longest chain of messages behind this rank, as of its last settle
    std::uint32_t newDepth = 0;     // ... including what arrived since
    std::uint64_t copyBytes = 0;    // copies not yet paid for
    std::uint64_t copiedTotal = 0;  // over all calls
    Time started = 0;
    bool waiting = false, done = false;
  };

  void startCall(int rank) {
    RankRun& s = ranks_[static_cast<std::size_t>(rank)];
    s.started = engine_.now();
    s.depth = s.newDepth = 0;
    engine_.work(rank, fromUs(engine_.params().callUs), kEnter);
  }

  void advance(int rank) {
    RankRun& s = ranks_[static_cast<std::size_t>(rank)];
    while (s.pc < s.steps.size()) {
      const CStep st = s.steps[s.pc];
      if (st.kind == CStep::Local) {
        s.copyBytes += st.bytes;
        s.copiedTotal += st.bytes;
        ++s.pc;
        continue;
      }
      if (s.copyBytes) return copy(rank, s);  // copies run in order, before what follows them
      switch (st.kind) {
        case CStep::Send:
          if (st.peer == rank) throw std::logic_error(fmt::format("rank {} sends to itself", rank));
          ++s.pc;
          ++s.pendingSends;
          engine_.send(rank, st.peer, st.bytes, Frame{st.step, s.call, s.depth + 1, 0, {}});
          break;
        case CStep::Recv:
          ++s.pc;
          post(rank, s, st);
          break;
        case CStep::Settle:
          if (s.pendingSends || s.pendingRecvs) {
            s.waiting = true;
            return;
          }
          ++s.pc;
          s.depth = std::max(s.depth, s.newDepth);
          break;
        case CStep::Local:
          break;
      }
    }
    if (s.copyBytes) return copy(rank, s);
    finishCall(rank, s);
  }

  void copy(int rank, RankRun& s) {
    engine_.work(rank, perBytes(s.copyBytes, engine_.params().cpuGBps), kCopied);
    s.copyBytes = 0;
  }

  void post(int rank, RankRun& s, const CStep& st) {
    const Key key = keyOf(rank, st.peer, s.call, st.step);
    auto it = waiting_.find(key);
    if (it == waiting_.end()) {
      waiting_.emplace(key, 0);
      ++s.pendingRecvs;
      return;
    }
    if (it->second == 0)
      throw std::runtime_error(
          fmt::format("rank {}: two receives from rank {} for call {} step {}", rank, st.peer, s.call, st.step));
    s.newDepth = std::max(s.newDepth, it->second - 1);  // it was here already
    waiting_.erase(it);
  }

  void maybeResume(int rank) {
    RankRun& s = ranks_[static_cast<std::size_t>(rank)];
    if (!s.waiting || s.pendingSends || s.pendingRecvs) return;
    s.waiting = false;
    ++s.pc;
    s.depth = std::max(s.depth, s.newDepth);
    advance(rank);
  }

  void finishCall(int rank, RankRun& s) {
    Time& slowest = callMax_[s.call];
    slowest = std::max(slowest, engine_.now() - s.started);
    if (s.call == 0) rounds_ = std::max(rounds_, s.depth);
    std::vector<CStep>().swap(s.steps);
    if (static_cast<int>(++s.call) < spec_.calls) return startCall(rank);
    s.done = true;
    if (spec_.onFinish) spec_.onFinish(rank, engine_.now() - t0_);
  }

  Engine& engine_;
  const CollectiveSpec& spec_;
  const Planner& planner_;
  std::vector<RankRun> ranks_;
  std::vector<Time> callMax_;
  // Posted receives (0) and frames that came first (their depth + 1).
  std::unordered_map<Key, std::uint32_t, KeyHash> waiting_;
  std::uint32_t rounds_ = 0;
  Time t0_ = 0;
};

bool choosePeriodic(const Engine& engine, const CollectiveSpec& spec, const Planner& planner) {
  const int perHost = engine.ranksPerHost();
  if (engine.params().hosts < 2 || spec.mode == Mode::Full) return false;
  if (spec.mode == Mode::Periodic) {
    if (!planner.shiftSymmetric(perHost))
      throw std::invalid_argument(
          fmt::format("{} ({}): the plans are not the same on every host up to a shift of "
                      "the ranks, so periodic mode cannot stand for them",
                      dc::opName(spec.op), planner.algorithm()));
    return true;
  }
  const double work = planner.estimatedWork(perHost);
  if (work <= spec.budget) return false;
  if (planner.shiftSymmetric(perHost)) return true;
  std::cerr << fmt::format(
      "tether-sim: {} ({}) is not shift-symmetric: running all ranks, ~{:.2g} steps and messages\n",
      dc::opName(spec.op), planner.algorithm(), work);
  return false;
}

}  // namespace

OpResult runCollective(Engine& engine, const CollectiveSpec& spec, bool cpuBound) {
  const auto wallStart = std::chrono::steady_clock::now();
  const std::uint64_t eventsBefore = engine.events();
  if (spec.calls < 1) throw std::invalid_argument("calls must be at least 1");
  const Planner planner(spec, engine.nranks(), cpuBound);
  engine.setPeriodic(choosePeriodic(engine, spec, planner));
  engine.setLinkBudget(engine.params().maxLinks);
  engine.resetCounters();
  Run run(engine, spec, planner);
  engine.setProtocol(&run);
  run.start();
  engine.run();
  engine.setProtocol(nullptr);
  const bool periodic = engine.periodic();
  const int scale = engine.scale();
  engine.setPeriodic(false);
  run.check();

  OpResult r;
  r.op = dc::opName(spec.op);
  r.algorithm = planner.algorithm();
  r.mode = periodic ? "periodic" : "full";
  r.bytes = spec.op == dc::Op::Barrier ? 0 : spec.bytes;
  r.rounds = run.rounds();
  const Counters& c = engine.counters();
  const auto calls = static_cast<std::uint64_t>(spec.calls);
  r.messages = c.messages * static_cast<std::uint64_t>(scale) / calls;
  r.busiestBytes = *std::max_element(c.sentBytes.begin(), c.sentBytes.end()) / calls;
  r.copiedBytes = run.mostCopied() / calls;
  r.connections = c.halfConnections * static_cast<std::uint64_t>(scale) / 2;
  r.rootMessages = c.rootMessages / calls;
  r.rootBytes = c.rootBytes / calls;
  r.peakLinks = engine.peakLinks();
  r.rootLinks = engine.links(0);
  for (Time t : run.callMax()) r.callUs.push_back(toUs(t));
  summarizeCalls(r);
  r.events = engine.events() - eventsBefore;
  r.wallS = std::chrono::duration<double>(std::chrono::steady_clock::now() - wallStart).count();
  return r;
}

}  // namespace tether::sim
