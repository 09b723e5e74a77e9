// tether-sim's counts against closed forms (every algorithm row, both
// rendezvous), settle semantics, determinism, and periodic mode against
// running every rank.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <optional>
#include <sstream>

#include "calibrate.hpp"
#include "scenario.hpp"

using namespace tether::sim;

namespace {

Params world(int hosts, int perHost) {
  Params p;
  p.hosts = hosts;
  p.ranksPerHost = perHost;
  p.cores = 64;
  p.maxLinks = 0;  // the closed forms count links that persist
  return p;
}

OpResult runRow(const Params& p, dc::Op op, const std::string& row, std::size_t bytes, Mode mode = Mode::Full) {
  Engine engine(p);
  CollectiveSpec s;
  s.op = op;
  s.forced = row;
  s.bytes = bytes;
  s.mode = mode;
  return runCollective(engine, s, p.cpuBound());
}

std::uint64_t ceilLog2(std::uint64_t n) {
  std::uint64_t k = 0;
  while ((1ull << k) < n) ++k;
  return k;
}

// Height of the k-nomial tree rooted at 0: the most non-zero base-k digits of a rank.
std::uint64_t knomialHeight(int n, int radix) {
  std::uint64_t most = 0;
  for (int r = 0; r < n; ++r) {
    std::uint64_t digits = 0;
    for (int v = r; v > 0; v /= radix) digits += v % radix != 0;
    most = std::max(most, digits);
  }
  return most;
}

// Bruck all-to-all: blocks one rank sends in all, the set bits of 0 .. N-1
// (test/unit/alltoall_plans_test.cpp).
std::uint64_t bruckBlocksSent(std::uint64_t n) {
  std::uint64_t bits = 0;
  for (std::uint64_t i = 0; i < n; ++i) bits += static_cast<std::uint64_t>(__builtin_popcountll(i));
  return bits;
}

// The leaders rows: groups of G (all-to-all: ceil(sqrt(N))), M of them.
struct Leaders {
  std::uint64_t G = 1, M = 1;
  Leaders(std::uint64_t n, int group) : G(static_cast<std::uint64_t>(group)), M((n + G - 1) / G) {}
  // Member to leader, leader to leader, leader to member.
  std::uint64_t messages(std::uint64_t n) const { return 2 * (n - M) + M * (M - 1); }
  // Three when a group other than the first has a member; two when only the first has one.
  std::uint64_t rounds(std::uint64_t n) const {
    if (n == 1) return 0;
    return M >= 3 || (M == 2 && n - G >= 2) ? 3 : 2;
  }
};

struct Counts {
  std::uint64_t messages, rounds;
  std::optional<std::uint64_t> busiest;  // payload bytes sent by the busiest rank
};

// The closed form for each row of the table; none for an unknown row, so a
// new row fails here until its counts are written down.
std::optional<Counts> closedForm(dc::Op family, const std::string& row, std::uint64_t n, std::uint64_t b) {
  const dc::Settings settings = dc::loadSettings();
  const int radix = dc::treeRadix(static_cast<int>(n), settings.tuning.radix);
  const std::uint64_t lg = ceilLog2(n), height = knomialHeight(static_cast<int>(n), radix);
  const std::uint64_t all = n * (n - 1), tree = 2 * (n - 1);
  if (family == dc::Op::Allgather) {
    if (row == "bruck") return Counts{n * lg, lg, (n - 1) * b};
    if (row == "ring") return Counts{all, n - 1, (n - 1) * b};
    if (row == "linear") return Counts{all, n > 1 ? 1u : 0u, (n - 1) * b};
    if (row == "tree")
      return Counts{tree, 2 * height,
                    static_cast<std::uint64_t>(dc::knomialRootLinks(static_cast<int>(n), radix)) * n * b};
    // Rank 0 sends its group's blocks to M - 1 leaders and everything to its G - 1 members.
    const Leaders l(n, dc::leadersGroup(static_cast<int>(n)));
    if (row == "leaders") return Counts{l.messages(n), l.rounds(n), n > 1 ? (l.G * (l.M - 1) + (l.G - 1) * n) * b : 0};
  }
  if (family == dc::Op::Alltoall) {
    if (row == "linear") return Counts{all, n > 1 ? 1u : 0u, (n - 1) * b};
    if (row == "pairwise") return Counts{all, n - 1, (n - 1) * b};
    // Bruck: ceil(log2 N) rounds of one message per rank, blocks forwarded.
    if (row == "bruck") return Counts{n * lg, lg, bruckBlocksSent(n) * b};
    // Gather to rank 0, transpose, scatter: rank 0 sends down every block not for itself.
    if (row == "tree") return Counts{tree, 2 * height, n * (n - 1) * b};
    // Rank 0 sends a G x size(h) tile to each other leader and N blocks to each member.
    const Leaders l(n, dc::leadersGroup(static_cast<int>(n)));
    if (row == "leaders") return Counts{l.messages(n), l.rounds(n), n > 1 ? (l.G * (n - l.G) + (l.G - 1) * n) * b : 0};
  }
  if (family == dc::Op::Broadcast) {
    if (row == "binomial") return Counts{n - 1, knomialHeight(static_cast<int>(n), 2), lg * b};
    if (row == "pipeline") {
      const std::uint64_t chunks = (b + settings.tuning.chunk - 1) / settings.tuning.chunk;
      return Counts{(n - 1) * chunks, n - 1, n > 1 ? b : 0};
    }
  }
  if (family == dc::Op::Barrier) {
    if (row == "dissemination") return Counts{n * lg, lg, 0};
    if (row == "tree") return Counts{tree, 2 * height, 0};
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("every algorithm row: messages, rounds and busiest bytes match the closed form", "[sim]") {
  const std::pair<int, int> shapes[] = {{1, 2}, {5, 1}, {2, 4}, {3, 4}, {25, 4}};
  for (const auto& algo : dc::kAlgorithms) {
    const std::size_t bytes = algo.family == dc::Op::Broadcast && std::string(algo.name) == "pipeline" ? 1 << 20 : 64;
    for (auto [hosts, perHost] : shapes) {
      const Params p = world(hosts, perHost);
      const auto n = static_cast<std::uint64_t>(p.nranks());
      INFO(dc::opName(algo.family) << " " << algo.name << " N=" << n);
      const auto expected = closedForm(algo.family, algo.name, n, algo.family == dc::Op::Barrier ? 0 : bytes);
      REQUIRE(expected);  // a new row needs its closed form here
      const OpResult r = runRow(p, algo.family, algo.name, bytes);
      CHECK(r.algorithm == algo.name);
      CHECK(r.messages == expected->messages);
      CHECK(r.rounds == expected->rounds);
      if (expected->busiest) CHECK(r.busiestBytes == *expected->busiest);
    }
  }
}

TEST_CASE("both rendezvous: 2(N-1) messages, the whole table from the root to every rank", "[sim]") {
  static_assert(tether::wire::kAddressBytes == 37);
  for (const char* kind : {"root", "star"}) {
    for (auto [hosts, perHost] : {std::pair{1, 1}, {1, 2}, {3, 3}, {16, 8}}) {
      Params p = world(hosts, perHost);
      p.startSpreadUs = 500;
      const auto n = static_cast<std::uint64_t>(p.nranks());
      INFO(kind << " N=" << n);
      Engine engine(p);
      const OpResult r = runRendezvous(engine, kind, "tether").result;
      const std::uint64_t table = 4 + 37 * n, reg = 4 + 37;
      CHECK(r.messages == 2 * (n - 1));
      CHECK(r.rounds == (n > 1 ? 2u : 0u));
      CHECK(r.connections == n - 1);
      CHECK(r.rootLinks == n - 1);
      CHECK(r.peakLinks == (n > 1 ? 1u : 0u));
      CHECK(r.busiestBytes == (n - 1) * table);
      CHECK(r.rootMessages == 2 * (n - 1));
      CHECK(r.rootBytes == (n - 1) * (table + reg));
    }
  }
}

// Children of rank r in the k-nomial tree rooted at 0: r + j k^s for j < k
// and every place s below r's lowest non-zero digit (every place, for 0).
std::uint64_t knomialChildren(std::uint64_t r, std::uint64_t n, std::uint64_t k) {
  std::uint64_t limit = n, count = 0;
  if (r != 0)
    for (limit = 1; (r / limit) % k == 0; limit *= k) {
    }
  for (std::uint64_t s = 1; s < limit; s *= k)
    for (std::uint64_t j = 1; j < k; ++j) count += r + j * s < n;
  return count;
}

TEST_CASE("tree rendezvous: registrations at the root, the table down a k-nomial tree, the root keeps its children",
          "[sim]") {
  const auto k = static_cast<std::uint64_t>(tether::rdv::kDefaultTreeRadix);  // the rendezvous tree's radix
  for (auto [hosts, perHost] : {std::pair{1, 1}, {1, 2}, {3, 3}, {16, 8}, {100, 10}}) {
    Params p = world(hosts, perHost);
    p.startSpreadUs = 300;
    const auto n = static_cast<std::uint64_t>(p.nranks());
    INFO("N=" << n << " radix " << k);
    Engine engine(p);
    const OpResult r = runRendezvous(engine, "tree", "tether").result;
    const std::uint64_t table = 4 + 37 * n, reg = 4 + 37, rootKids = knomialChildren(0, n, k);
    std::uint64_t busiest = 0, peak = n > 1 ? 1 : 0;
    for (std::uint64_t q = 0; q < n; ++q) {
      busiest = std::max(busiest, knomialChildren(q, n, k) * table + (q ? reg : 0));
      if (q) peak = std::max(peak, 1 + knomialChildren(q, n, k));  // its parent and its children
    }
    CHECK(r.messages == 2 * (n - 1));  // a registration and a table per rank
    CHECK(r.rounds == (n > 1 ? 1 + knomialHeight(static_cast<int>(n), static_cast<int>(k)) : 0u));
    CHECK(r.rootMessages == (n - 1) + rootKids);
    CHECK(r.rootBytes == (n - 1) * reg + rootKids * table);
    CHECK(r.rootLinks == rootKids);  // the other registration links are released
    CHECK(r.busiestBytes == busiest);
    CHECK(r.connections == (n - 1) + (n - 1 - rootKids));
    CHECK(r.peakLinks == peak);
  }
}

TEST_CASE("host-local rendezvous with --table-tree=false: one registration per host at the root, the table to every leader",
          "[sim]") {
  for (auto [hosts, perHost] : {std::pair{1, 1}, {1, 2}, {3, 3}, {8, 1}, {16, 8}, {100, 10}}) {
    Params p = world(hosts, perHost);
    p.startSpreadUs = 300;
    p.tableTree = false;  // the root's star of tables (--table-tree=false)
    const std::uint64_t h = static_cast<std::uint64_t>(hosts), r = static_cast<std::uint64_t>(perHost), n = h * r;
    INFO("H=" << h << " R=" << r);
    Engine engine(p);
    const OpResult o = runRendezvous(engine, "host-local", "tether").result;
    const std::uint64_t table = 4 + 37 * n, reg = 4 + 37, hostReg = 4 + 37 * r;
    CHECK(o.messages == 2 * (n - 1));                    // a registration and a table per rank
    CHECK(o.rootMessages == 2 * (r - 1) + 2 * (h - 1));  // hosts, not N: a star of H - 1 tables
    CHECK(o.rootBytes == (r - 1) * reg + (h - 1) * hostReg + (h - 1 + r - 1) * table);
    CHECK(o.rootLinks == (r - 1) + (h - 1));  // its own ranks and every leader: none released
    CHECK(o.connections == (r - 1) * h + (h - 1));
    CHECK(o.rounds == (r > 1 ? 2u : 0u) + (h > 1 ? 2u : 0u));
  }
}

TEST_CASE("host-local rendezvous with --table-tree: the table down a tree of leaders, hosts + O(log H) at the root",
          "[sim]") {
  for (auto [hosts, perHost] : {std::pair{1, 1}, {1, 2}, {3, 3}, {8, 1}, {16, 8}, {100, 10}}) {
    Params p = world(hosts, perHost);
    p.startSpreadUs = 300;
    p.tableTree = true;
    const std::uint64_t h = static_cast<std::uint64_t>(hosts), r = static_cast<std::uint64_t>(perHost), n = h * r,
                        k = static_cast<std::uint64_t>(p.hostTreeRadix);
    INFO("H=" << h << " R=" << r << " radix " << k);
    Engine engine(p);
    const OpResult o = runRendezvous(engine, "host-local", "tether").result;
    const std::uint64_t table = 4 + 37 * n, reg = 4 + 37, hostReg = 4 + 37 * r, rootKids = knomialChildren(0, h, k);
    CHECK(o.messages == 2 * (n - 1));  // a registration and a table per rank, as the tree
    CHECK(o.rootMessages == (r - 1) + (h - 1) + rootKids + (r - 1));  // hosts + O(log H), not N
    CHECK(o.rootBytes == (r - 1) * reg + (h - 1) * hostReg + (rootKids + r - 1) * table);
    CHECK(o.rootLinks == (r - 1) + rootKids);  // its own ranks and its child leaders
    CHECK(o.connections == (r - 1) * h + (h - 1) + (h - 1 - rootKids));
    CHECK(o.rounds == (r > 1 ? 2u : 0u) + (h > 1 ? 1u : 0u) + knomialHeight(hosts, p.hostTreeRadix));
  }
}

TEST_CASE("tether-sim's default rendezvous is the library's: host-local aggregation, the table down the leaders' tree",
          "[sim]") {
  const char* rendezvous = std::getenv("TETHER_RENDEZVOUS");
  const char* hostLocal = std::getenv("TETHER_HOST_LOCAL");
  if ((rendezvous && *rendezvous && std::string(rendezvous) != "auto") || (hostLocal && std::string(hostLocal) == "0")) {
    WARN("TETHER_RENDEZVOUS / TETHER_HOST_LOCAL set: not the library's default, nothing to check");
    return;
  }
  const Scenario s;
  CHECK(s.rendezvous == "auto");
  for (auto [hosts, perHost] : {std::pair{1, 2}, {3, 3}, {16, 8}, {100, 10}}) {
    const Params p = world(hosts, perHost);
    const std::uint64_t h = static_cast<std::uint64_t>(hosts), r = static_cast<std::uint64_t>(perHost),
                        rootKids = knomialChildren(0, h, static_cast<std::uint64_t>(p.hostTreeRadix));
    INFO("H=" << h << " R=" << r);
    Engine engine(p);
    const OpResult o = runRendezvous(engine, s.rendezvous, "tether").result;
    CHECK(o.rootMessages == (r - 1) + (h - 1) + rootKids + (r - 1));  // as host-local with the leaders' tree
    CHECK(o.rootLinks == (r - 1) + rootKids);
    CHECK(o.rounds == (r > 1 ? 2u : 0u) + (h > 1 ? 1u : 0u) + knomialHeight(hosts, p.hostTreeRadix));
  }
}

TEST_CASE("after the tree rendezvous, a gather to rank 0 dials again every link the root released", "[sim]") {
  const auto k = static_cast<std::uint64_t>(tether::rdv::kDefaultTreeRadix);  // the rendezvous tree's radix
  const Params p = world(16, 8);
  const std::uint64_t n = 128, kept = knomialChildren(0, n, k);
  Engine engine(p);
  runRendezvous(engine, "tree", "tether");
  CollectiveSpec s;
  s.build = [](dc::Plan& plan) {
    if (plan.rank() != 0) return plan.send(0, 0, dc::out(), 8);
    for (int q = 1; q < plan.size(); ++q) plan.recv(q, 0, dc::out(), 8);
  };
  const OpResult r = runCollective(engine, s, false);
  CHECK(r.messages == n - 1);
  CHECK(r.connections == n - 1 - kept);
  CHECK(r.rootLinks == n - 1);
}

TEST_CASE("a released link is gone from both sides; the other links stay findable", "[sim]") {
  PeerMap m;
  for (int peer = 0; peer < 1000; peer += 3) m.insert(peer).up = 1;
  for (int peer = 0; peer < 1000; peer += 6) m.erase(peer);
  std::size_t left = 0;
  for (int peer = 0; peer < 1000; ++peer) {
    const bool present = peer % 3 == 0 && peer % 6 != 0;
    CHECK((m.find(peer) != nullptr) == present);
    left += present;
  }
  CHECK(m.size() == left);
}

TEST_CASE("links persist: a second call opens none, and init's link to the root is reused", "[sim]") {
  Params p = world(4, 2);
  Engine engine(p);
  runRendezvous(engine, "root", "tether");
  CollectiveSpec s;
  s.op = dc::Op::Allgather;
  s.forced = "tree";  // flat: everyone talks to rank 0 only
  s.calls = 3;
  const OpResult r = runCollective(engine, s, false);
  CHECK(r.connections == 0);
  CHECK(r.peakLinks == 1);
  CHECK(r.rootLinks == 7);
  CHECK(r.callUs.size() == 3);
  CHECK(r.messages == 14);  // per call
}

TEST_CASE("past the link budget a rank closes its least recently used idle link and dials again when it needs it",
          "[sim]") {
  Params p = world(1, 64);
  p.maxLinks = 16;
  Engine engine(p);
  CollectiveSpec s;
  s.calls = 2;
  s.build = [](dc::Plan& plan) {  // rank 0 asks every other rank in turn and waits for its answer
    if (plan.rank() == 0) {
      for (int q = 1; q < plan.size(); ++q) {
        plan.send(q, 0, dc::out(), 8);
        plan.recv(q, 1, dc::out(), 8);
        plan.settle();
      }
    } else {
      plan.recv(0, 0, dc::out(), 8);
      plan.settle();
      plan.send(0, 1, dc::out(), 8);
    }
  };
  const OpResult r = runCollective(engine, s, false);
  CHECK(r.messages == 2 * 63);     // per call
  CHECK(r.rootLinks <= 17);        // the budget, and the link just dialled
  CHECK(r.connections == 2 * 63);  // LRU over 63 peers in turn: the second call dials every one again
  p.maxLinks = 0;
  Engine unlimited(p);
  const OpResult kept = runCollective(unlimited, s, false);
  CHECK(kept.rootLinks == 63);
  CHECK(kept.connections == 63);
}

TEST_CASE("the new all-to-all rows at scale: Bruck ceil(log2 N) rounds, tree 2(N-1) messages", "[sim]") {
  for (auto [hosts, perHost] : {std::pair{125, 8}, {512, 8}}) {
    const Params p = world(hosts, perHost);
    const auto n = static_cast<std::uint64_t>(p.nranks());
    INFO("N=" << n);
    const OpResult bruck = runRow(p, dc::Op::Alltoall, "bruck", 8);
    CHECK(bruck.rounds == ceilLog2(n));
    CHECK(bruck.messages == n * ceilLog2(n));
    CHECK(bruck.busiestBytes == bruckBlocksSent(n) * 8);
    // Peers: r - 2^k and r + 2^k; the two coincide when 2^j + 2^k = N.
    const int bits = __builtin_popcountll(n);
    CHECK(bruck.peakLinks == 2 * ceilLog2(n) - (bits == 1 ? 1 : bits == 2 ? 2 : 0));
    CHECK(bruck.copiedBytes > 0);  // packs and rotations, CopyBlocks steps
  }
  const Params p = world(128, 8);
  const OpResult tree = runRow(p, dc::Op::Alltoall, "tree", 8);
  CHECK(tree.messages == 2 * (1024 - 1));
  CHECK(tree.busiestBytes == 1024ull * 1023 * 8);
  CHECK(tree.rootMessages == 2u * dc::knomialRootLinks(1024, dc::treeRadix(1024, dc::loadSettings().tuning.radix)));
}

TEST_CASE("local copies, Copy and CopyBlocks alike, cost their bytes at the copy rate", "[sim]") {
  Params p = world(1, 1);
  p.cpuGBps = 0.001;  // 1 byte per ns: 100 bytes, 100 us
  auto run = [&](bool copies) {
    Engine engine(p);
    CollectiveSpec s;
    s.build = [copies](dc::Plan& plan) {
      if (!copies) return;
      plan.copyBlocks(dc::out(0), 16, dc::in(0), 32, 16, 5);  // 80 bytes in one step
      plan.copy(dc::out(100), dc::in(200), 20);
    };
    return runCollective(engine, s, false);
  };
  const OpResult none = run(false), some = run(true);
  CHECK(none.copiedBytes == 0);
  CHECK(some.copiedBytes == 100);
  CHECK(some.firstUs - none.firstUs == Approx(100.0));
}

TEST_CASE("settle: a rank goes on only when its receives have arrived", "[sim]") {
  // 2 -> 1 -> 0 in a chain; rank 2 first copies 80 MB (10 ms at 8 GB/s).
  Params p = world(3, 1);
  p.latencyUs = 5000;
  Engine engine(p);
  CollectiveSpec s;
  s.buildName = "chain";
  s.build = [](dc::Plan& plan) {
    const int r = plan.rank();
    if (r == 2) {
      plan.copy(dc::out(0), dc::out(1 << 27), 80'000'000);
      plan.send(1, 0, dc::out(), 8);
    } else {
      plan.recv(r + 1, 0, dc::out(), 8);
      plan.settle();
      if (r == 1) plan.send(0, 0, dc::out(), 8);
    }
  };
  std::vector<double> finished(3, 0);
  s.onFinish = [&](int rank, std::int64_t ps) { finished[static_cast<std::size_t>(rank)] = toUs(ps); };
  const OpResult r = runCollective(engine, s, false);
  CHECK(r.rounds == 2);
  CHECK(finished[2] >= 10000);
  CHECK(finished[1] >= finished[2] + 5000);
  CHECK(finished[0] >= finished[1] + 5000);
  CHECK(r.firstUs == finished[0]);
}

TEST_CASE("settle: a large send is waited for until the NIC has sent it, a small one is not", "[sim]") {
  Params p = world(2, 1);
  p.nicGBps = 1;
  for (std::size_t bytes : {std::size_t{1000}, std::size_t{10'000'000}}) {
    Engine engine(p);
    CollectiveSpec s;
    s.build = [bytes](dc::Plan& plan) {
      if (plan.rank() == 0)
        plan.send(1, 0, dc::out(), bytes);
      else
        plan.recv(0, 0, dc::out(), bytes);
    };
    double sender = 0;
    s.onFinish = [&](int rank, std::int64_t ps) {
      if (rank == 0) sender = toUs(ps);
    };
    runCollective(engine, s, false);
    if (bytes > p.eagerBytes)
      CHECK(sender >= 10000);  // 10 MB at 1 GB/s
    else
      CHECK(sender < 200);
  }
}

TEST_CASE("a plan whose receive never comes is reported, not hung", "[sim]") {
  Engine engine(world(2, 1));
  CollectiveSpec s;
  s.build = [](dc::Plan& plan) {
    if (plan.rank() == 0) plan.recv(1, 0, dc::out(), 8);
  };
  CHECK_THROWS_WITH(runCollective(engine, s, false), Catch::Contains("rank 0 never finished"));
}

TEST_CASE("same seed, same figures; the seed moves the start spread", "[sim]") {
  auto run = [](std::uint64_t seed) {
    Scenario s;
    s.params = world(4, 4);
    s.params.cores = 2;
    s.params.startSpreadUs = 1000;
    s.params.seed = seed;
    s.ops = {"init", "allgather", "alltoallv", "barrier"};
    s.calls = 3;
    std::ostringstream out;
    for (OpResult r : runScenario(s).tether) {
      r.wallS = 0;
      printJson(out, r);
    }
    return out.str();
  };
  const std::string a = run(7);
  CHECK(a == run(7));
  CHECK(a != run(8));
}

TEST_CASE("periodic mode gives the figures of running every rank, for shift-symmetric plans", "[sim]") {
  // Counts are exact. Times are exact where no two ranks dial each other at
  // once; where they do (a mesh; rank a and a + N/2 with H even), which side
  // dials depends on the order of ranks, which no shift preserves.
  const std::tuple<dc::Op, const char*, double> rows[] = {{dc::Op::Allgather, "ring", 0},
                                                          {dc::Op::Allgather, "bruck", 0},
                                                          {dc::Op::Alltoall, "linear", 0.02},
                                                          {dc::Op::Barrier, "dissemination", 0}};
  for (int hosts : {7, 8}) {
    const Params p = world(hosts, 4);
    for (auto [op, row, tolerance] : rows) {
      INFO(row << " H=" << hosts);
      const OpResult full = runRow(p, op, row, 4096, Mode::Full);
      const OpResult periodic = runRow(p, op, row, 4096, Mode::Periodic);
      CHECK(periodic.mode == "periodic");
      CHECK(periodic.messages == full.messages);
      CHECK(periodic.rounds == full.rounds);
      CHECK(periodic.busiestBytes == full.busiestBytes);
      CHECK(periodic.connections == full.connections);
      CHECK(periodic.peakLinks == full.peakLinks);
      CHECK(periodic.rootMessages == full.rootMessages);
      CHECK(periodic.rootBytes == full.rootBytes);
      const double allowed = hosts % 2 == 0 ? 0.02 : tolerance;
      CHECK(periodic.firstUs == Approx(full.firstUs).epsilon(std::max(allowed, 1e-12)));
    }
  }
  CHECK_THROWS_WITH(runRow(world(8, 4), dc::Op::Allgather, "tree", 64, Mode::Periodic),
                    Catch::Contains("not the same"));
}

TEST_CASE("ranks outnumbering cores queue for them", "[sim]") {
  Params p = world(1, 8);
  p.cores = 8;
  const double roomy = runRow(p, dc::Op::Alltoall, "linear", 64).firstUs;
  p.cores = 2;
  const double crowded = runRow(p, dc::Op::Alltoall, "linear", 64).firstUs;
  CHECK(crowded > 2.5 * roomy);
}

TEST_CASE("tether-bench JSON lines are read for calibration", "[sim]") {
  std::istringstream in(
      "{\"bytes\":64,\"impl\":\"tether\",\"init_ms\":2.5,\"median_us\":300.5,\"nranks\":16,\"op\":\"allgather\"}\n"
      "not json\n"
      "{\"bytes\":64,\"init_min_ms\":1.5,\"init_ms\":2.5,\"median_us\":9,\"nranks\":16,\"op\":\"barrier\","
      "\"rendezvous_ms\":2}\n");
  const auto m = readBenchJson(in);
  REQUIRE(m.size() == 2);
  CHECK(m[0].nranks == 16);
  CHECK(m[0].op == "allgather");
  CHECK(m[0].medianUs == 300.5);
  CHECK(m[0].initMs == 2.5);
  CHECK(m[0].initMinMs == -1);
  CHECK(m[0].rendezvousMs == -1);
  CHECK(m[1].initMinMs == 1.5);
  CHECK(m[1].rendezvousMs == 2);
}
