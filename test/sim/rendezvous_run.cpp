#include "rendezvous_run.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <random>
#include <stdexcept>

#include "base/settings.hpp"

namespace tether::sim {

namespace {

// TETHER_RENDEZVOUS=auto as the library chooses it (lib/rendezvous/select.cpp
// with a real loop): host-local aggregation unless TETHER_HOST_LOCAL=0. A
// simulated world has no loop, so rdv::make alone would skip it.
std::unique_ptr<rdv::Rendezvous> makeDefault(rdv::Host& host, const rdv::Config& config, const Params& params) {
  if (config.nranks > 1 && settings::integer("TETHER_HOST_LOCAL") == 1) return makeHostLocal(host, config, params);
  return rdv::make(host, config, "auto");
}

}  // namespace

const std::vector<RendezvousKind>& rendezvousKinds() {
  static const std::vector<RendezvousKind> kinds = {
      {"root", +[](rdv::Host& h, const rdv::Config& c, const Params&) { return rdv::makeRootStar(h, c); },
       "tether's root star (lib/rendezvous/root_star.cpp)"},
      {"tree", +[](rdv::Host& h, const rdv::Config& c, const Params&) { return rdv::make(h, c, "tree"); },
       "tether's k-nomial tree (lib/rendezvous/tree.cpp, radix 8)"},
      {"auto", &makeDefault,
       "tether's default, as World: host-local aggregation with the table down the leaders' tree "
       "(TETHER_HOST_LOCAL=1, the default); with TETHER_HOST_LOCAL=0 the tree from rdv::kTreeFromRanks ranks, "
       "else the root star"},
      {"no-host-local", +[](rdv::Host& h, const rdv::Config& c, const Params&) { return rdv::make(h, c, "auto"); },
       "auto with TETHER_HOST_LOCAL=0: the tree from rdv::kTreeFromRanks ranks, else the root star (the one-host "
       "fit's rendezvous)"},
      {"host-local", &makeHostLocal,
       "modelled only: ranks meet their host's leader, one registration per host at the root, the table down "
       "a tree of leaders (--host-tree-radix)"},
      {"star", +[](rdv::Host& h, const rdv::Config& c, const Params&) { return makeAnchorStar(h, c); },
       "anchor: one server answers every rank with the whole table"},
  };
  return kinds;
}

const RendezvousKind& findRendezvous(const std::string& name) {
  std::string known;
  for (const auto& k : rendezvousKinds()) {
    if (name == k.name) return k;
    known += std::string(known.empty() ? "" : "|") + k.name;
  }
  throw std::invalid_argument("unknown rendezvous '" + name + "' (use " + known + ")");
}

std::string defaultRendezvous() {
  const char* v = std::getenv("TETHER_RENDEZVOUS");
  return v && *v ? v : "auto";  // as World does
}

PeerAddress simAddress(int rank, const Params& params) {
  const int host = rank / params.ranksPerHost;
  PeerAddress a;
  a.family = 4;
  a.addr = {10, static_cast<unsigned char>(host >> 16), static_cast<unsigned char>(host >> 8),
            static_cast<unsigned char>(host)};
  a.port = static_cast<std::uint16_t>(20000 + rank % params.ranksPerHost);
  a.hostId = 0x5eed0000ull + static_cast<std::uint64_t>(host);
  a.cores = static_cast<std::uint16_t>(std::min(params.cores, 65535));
  return a;
}

namespace {

bool sameAddress(const PeerAddress& a, const PeerAddress& b) {
  return a.family == b.family && a.addr == b.addr && a.port == b.port && a.hostId == b.hostId && a.cores == b.cores;
}

constexpr std::uint64_t kStart = 0;  // tokens above it run a posted function

class Run;

// The world as one rank's rendezvous sees it.
class RankHost final : public rdv::Host {
 public:
  RankHost(Run& run, int rank) : run_(&run), rank_(rank) {}
  void connect(int peer, const PeerAddress& at) override;
  void send(int peer, wire::Kind kind, wire::SharedBytes payload) override;
  void finished(std::exception_ptr error) override;
  void abortAll(const std::string& reason) override;
  void post(std::function<void()> fn) override;
  bool release(int peer) override;

 private:
  Run* run_;
  int rank_;
};

class Run final : public Protocol {
 public:
  Run(Engine& engine, const RendezvousKind& kind) : engine_(engine), n_(engine.nranks()) {
    const Params& p = engine.params();
    hosts_.reserve(static_cast<std::size_t>(n_));
    for (int r = 0; r < n_; ++r) hosts_.emplace_back(*this, r);
    ranks_.resize(static_cast<std::size_t>(n_));
    depth_.assign(static_cast<std::size_t>(n_), 0);
    finishedAt_.assign(static_cast<std::size_t>(n_), -1);
    for (int r = 0; r < n_; ++r) {
      rdv::Config c{r, n_, simAddress(0, p), std::chrono::milliseconds(600000)};  // the tree's radix: 8
      ranks_[static_cast<std::size_t>(r)] = kind.make(hosts_[static_cast<std::size_t>(r)], c, p);
    }
  }

  void start() {
    const Params& p = engine_.params();
    std::mt19937_64 draw(p.seed);
    std::uniform_real_distribution<double> spread(0.0, p.startSpreadUs);
    t0_ = engine_.now();
    for (int r = 0; r < n_; ++r) engine_.at(t0_ + (r == 0 ? 0 : fromUs(spread(draw))), r, kStart);
  }

  // ---- Protocol ----
  void resumed(int rank, std::uint64_t token) override {
    if (token == kStart) return ranks_[static_cast<std::size_t>(rank)]->start(simAddress(rank, engine_.params()));
    auto fn = std::move(posted_[token - 1]);
    fn();
  }
  void delivered(int rank, const Message& m) override {
    depth_[static_cast<std::size_t>(rank)] = std::max(depth_[static_cast<std::size_t>(rank)], m.depth);
    if (!ranks_[static_cast<std::size_t>(rank)]->onFrame(m.src, static_cast<wire::Kind>(m.kind), m.payload))
      fail(fmt::format("rank {}: the rendezvous did not take a {} frame from rank {}", rank,
                       wire::kindName(static_cast<wire::Kind>(m.kind)), m.src));
  }
  void sendLeft(int, const Message&) override {}
  void linkUp(int rank, int peer) override {
    if (finishedAt_[static_cast<std::size_t>(rank)] < 0) ranks_[static_cast<std::size_t>(rank)]->onLinkUp(peer);
  }
  void linkDown(int rank, int peer) override {  // a released link, closed gracefully
    if (finishedAt_[static_cast<std::size_t>(rank)] < 0)
      ranks_[static_cast<std::size_t>(rank)]->onLinkDown(peer, "released (idle goodbye)", true);
  }

  // ---- from the ranks' hosts ----
  void connect(int rank, int peer, const PeerAddress& at) {
    if (!sameAddress(at, simAddress(peer, engine_.params())))
      fail(fmt::format("rank {} dials rank {} at an address that is not that rank's", rank, peer));
    engine_.connect(rank, peer);
  }
  void send(int rank, int peer, wire::Kind kind, wire::SharedBytes payload) {
    if (!engine_.linked(rank, peer))  // the real world drops it: there is no link to queue it on
      return fail(fmt::format("rank {} sends a {} frame to rank {} without a link", rank, wire::kindName(kind), peer));
    const std::uint64_t bytes = payload ? payload->size() : 0;
    engine_.send(
        rank, peer, bytes,
        Frame{0, 0, depth_[static_cast<std::size_t>(rank)] + 1, static_cast<std::uint16_t>(kind), std::move(payload)});
  }
  void finished(int rank, std::exception_ptr error) {
    if (finishedAt_[static_cast<std::size_t>(rank)] >= 0) return fail(fmt::format("rank {} finished twice", rank));
    finishedAt_[static_cast<std::size_t>(rank)] = engine_.now();
    if (!error) return;
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      fail(e.what());
    }
  }
  void fail(const std::string& what) {
    if (error_.empty()) error_ = what;
  }
  bool release(int rank, int peer) { return engine_.release(rank, peer); }
  void post(int rank, std::function<void()> fn) {
    posted_.push_back(std::move(fn));
    engine_.work(rank, 0, posted_.size());
  }

  // After the run: all finished, addresses right; returns rank 0's topology.
  bool check() {
    if (!error_.empty()) throw std::runtime_error("rendezvous failed: " + error_);
    const auto late = std::find(finishedAt_.begin(), finishedAt_.end(), Time{-1});
    if (late != finishedAt_.end())
      throw std::runtime_error(fmt::format("rendezvous never finished at rank {} ({} ranks unfinished)",
                                           late - finishedAt_.begin(), std::count(late, finishedAt_.end(), -1)));
    const Params& p = engine_.params();
    for (int r : {0, 1, n_ / 2, n_ - 1}) {
      if (r >= n_) continue;
      for (int q : {0, 1, r, (r + 7) % n_, n_ - 1})
        if (q < n_ && !sameAddress(ranks_[static_cast<std::size_t>(r)]->address(q), simAddress(q, p)))
          throw std::runtime_error(fmt::format("rank {} learned a wrong address for rank {}", r, q));
    }
    std::map<std::uint64_t, std::pair<int, int>> hosts;  // host id -> ranks, cores
    for (int q = 0; q < n_; ++q) {
      const PeerAddress a = ranks_[0]->address(q);
      auto& h = hosts[a.hostId];
      ++h.first;
      h.second = a.cores;
    }
    bool cpuBound = false;
    for (const auto& [id, h] : hosts) cpuBound |= h.second > 0 && h.first > h.second;
    return cpuBound;
  }

  Time t0() const { return t0_; }
  Time lastFinish() const { return *std::max_element(finishedAt_.begin(), finishedAt_.end()); }
  std::uint32_t rounds() const { return *std::max_element(depth_.begin(), depth_.end()); }

 private:
  Engine& engine_;
  int n_;
  std::vector<RankHost> hosts_;
  std::vector<std::unique_ptr<rdv::Rendezvous>> ranks_;
  std::vector<std::uint32_t> depth_;
  std::vector<Time> finishedAt_;
  std::vector<std::function<void()>> posted_;
  std::string error_;
  Time t0_ = 0;
};

void RankHost::connect(int peer, const PeerAddress& at) { run_->connect(rank_, peer, at); }
void RankHost::send(int peer, wire::Kind kind, wire::SharedBytes payload) {
  run_->send(rank_, peer, kind, std::move(payload));
}
void RankHost::finished(std::exception_ptr error) { run_->finished(rank_, error); }
void RankHost::abortAll(const std::string& reason) { run_->fail(fmt::format("rank {} aborts all: {}", rank_, reason)); }
void RankHost::post(std::function<void()> fn) { run_->post(rank_, std::move(fn)); }
bool RankHost::release(int peer) { return run_->release(rank_, peer); }

}  // namespace

InitOutcome runRendezvous(Engine& engine, const std::string& kind, const std::string& who) {
  const auto wallStart = std::chrono::steady_clock::now();
  const std::uint64_t eventsBefore = engine.events();
  const RendezvousKind& k = findRendezvous(kind);
  engine.setPeriodic(false);
  engine.setLinkBudget(0);  // the rendezvous owns the links it opens
  engine.resetCounters();
  InitOutcome out;
  {
    Run run(engine, k);
    engine.setProtocol(&run);
    run.start();
    engine.run();
    engine.setProtocol(nullptr);
    out.cpuBound = run.check();
    OpResult& r = out.result;
    r.op = "init";
    r.algorithm = k.name;
    r.who = who;
    r.rounds = run.rounds();
    r.callUs = {toUs(run.lastFinish() - run.t0())};
  }  // the rendezvous objects go here
  OpResult& r = out.result;
  const Counters& c = engine.counters();
  r.messages = c.messages;
  r.busiestBytes = *std::max_element(c.sentBytes.begin(), c.sentBytes.end());
  r.connections = c.halfConnections / 2;
  r.rootMessages = c.rootMessages;
  r.rootBytes = c.rootBytes;
  r.peakLinks = engine.peakLinks();
  r.rootLinks = engine.links(0);
  summarizeCalls(r);
  r.events = engine.events() - eventsBefore;
  r.wallS = std::chrono::duration<double>(std::chrono::steady_clock::now() - wallStart).count();
  return out;
}

}  // namespace tether::sim
