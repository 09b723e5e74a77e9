// The all-to-all rows of the algorithm table, recorded for every rank and
// replayed together (plan_replay.hpp): each delivers every block, keeps the
// plan rules and the full-key rule, and costs what its formula says
// (messages, rounds, bytes of the busiest rank, peers per rank). No sockets.
#include <catch2/catch.hpp>

#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "plan_replay.hpp"
#include "tether/detail/coll/table.hpp"

namespace dc = tether::detail::coll;
using planreplay::Memory;
using planreplay::Replay;
using planreplay::Stats;

namespace {

unsigned char pattern(int src, int dst, std::size_t i) {
  return static_cast<unsigned char>(src * 131 + dst * 17 + i * 7 + (i >> 8) + 1);
}

// One alltoall call (uniform blocks) as every rank sees it.
struct Uniform {
  std::vector<std::size_t> counts, displs;
  Uniform(int n, std::size_t bytes) : counts(static_cast<std::size_t>(n), bytes), displs(static_cast<std::size_t>(n)) {
    for (int i = 0; i < n; ++i) displs[static_cast<std::size_t>(i)] = static_cast<std::size_t>(i) * bytes;
  }
  dc::Call call() const {
    dc::Call c;
    c.op = dc::Op::Alltoall;
    c.bytes = counts.empty() ? 0 : counts[0];
    c.blocks = dc::Blocks{counts.data(), displs.data(), counts.data(), displs.data()};
    return c;
  }
};

dc::Shape shapeOf(int rank, int n, int radix) {
  dc::Shape s;
  s.rank = rank;
  s.size = n;
  s.radix = radix;
  return s;
}

const dc::Algorithm& row(const char* name) {
  const dc::Algorithm* a = dc::findAlgorithm(dc::Op::Alltoall, name);
  REQUIRE(a != nullptr);
  return *a;
}

dc::Plan recordRank(const char* name, int rank, int n, std::size_t bytes, int radix = 64) {
  Uniform u(n, bytes);
  return dc::record(row(name), shapeOf(rank, n, radix), u.call());
}

// Records `name` for all n ranks, replays with patterned data, checks every
// byte of every Out, and returns the counts.
Stats runUniform(const char* name, int n, std::size_t bytes, int radix = 64) {
  INFO(name << " N=" << n << " bytes=" << bytes << " radix=" << radix);
  std::vector<dc::Plan> plans;
  std::vector<Memory> mem(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    plans.push_back(recordRank(name, r, n, bytes, radix));
    auto& m = mem[static_cast<std::size_t>(r)];
    m.in.resize(static_cast<std::size_t>(n) * bytes);
    m.out.assign(static_cast<std::size_t>(n) * bytes, 0xEE);
    for (int d = 0; d < n; ++d)
      for (std::size_t i = 0; i < bytes; ++i) m.in[static_cast<std::size_t>(d) * bytes + i] = pattern(r, d, i);
  }
  const Stats st = Replay(plans, mem).run();
  for (int r = 0; r < n; ++r)
    for (int s = 0; s < n; ++s)
      for (std::size_t i = 0; i < bytes; ++i)
        PLAN_CHECK(mem[static_cast<std::size_t>(r)].out[static_cast<std::size_t>(s) * bytes + i] == pattern(s, r, i),
                   name << " N=" << n << " bytes=" << bytes << ": rank " << r << " has a wrong byte " << i
                        << " of the block from rank " << s);
  return st;
}

int ceilLog2(long long n) {
  int k = 0;
  while ((1LL << k) < n) ++k;
  return k;
}

// Bruck: distinct peers of a rank. It sends to r - 2^k and receives from
// r + 2^k for k < ceil(log2 N); the two coincide when 2^j + 2^k = N.
std::size_t bruckPeers(int n) {
  if (n == 1) return 0;
  const int rounds = ceilLog2(n), bits = __builtin_popcount(static_cast<unsigned>(n));
  return static_cast<std::size_t>(2 * rounds - (bits == 1 ? 1 : bits == 2 ? 2 : 0));
}

// Bruck: blocks one rank sends in all, the set bits of 0 .. N-1.
std::size_t bruckBlocksSent(int n) {
  std::size_t bits = 0;
  for (int i = 0; i < n; ++i) bits += static_cast<std::size_t>(__builtin_popcount(static_cast<unsigned>(i)));
  return bits;
}

// Depth of the k-nomial tree: the most non-zero base-radix digits of a rank < N.
int treeDepth(int n, int radix) {
  int most = 0;
  for (int r = 0; r < n; ++r) {
    int digits = 0;
    for (int x = r; x; x /= radix) digits += x % radix != 0;
    most = std::max(most, digits);
  }
  return most;
}

}  // namespace

TEST_CASE("every all-to-all row delivers every block for N = 1..17 and blocks of 0, 1, 7 and 64 bytes",
          "[unit][alltoall]") {
  for (const char* name : {"linear", "pairwise", "bruck", "tree", "leaders"})
    for (int n = 1; n <= 17; ++n)
      for (std::size_t bytes : {0, 1, 7, 64}) runUniform(name, n, bytes);
  for (int radix : {2, 3, 4})
    for (int n = 1; n <= 17; ++n) runUniform("tree", n, 7, radix);
}

TEST_CASE("all-to-all rows keep the full-key rule and the plan rules for N = 1..70", "[unit][alltoall]") {
  // The replay fails on a (peer, step) received twice by a rank, a send key
  // posted twice, a length mismatch, a buffer touched while posted, a frame
  // never received, or a deadlock; and every byte is checked.
  for (int n = 1; n <= 70; ++n) {
    for (const char* name : {"linear", "pairwise", "bruck", "tree", "leaders"}) runUniform(name, n, 3);
    for (int radix : {2, 3, 5}) runUniform("tree", n, 2, radix);
  }
}

TEST_CASE("all-to-all rows cost what their formulas say for N = 1..70", "[unit][alltoall]") {
  const std::size_t b = 5;
  for (int n = 1; n <= 70; ++n) {
    INFO("N=" << n);
    const auto N = static_cast<std::size_t>(n);
    const int L = ceilLog2(n);
    {
      const Stats st = runUniform("linear", n, b);
      CHECK(st.messages == N * (N - 1));
      CHECK(st.rounds == (n > 1 ? 1 : 0));
      CHECK(st.busiestBytes() == (N - 1) * b);
      CHECK(st.mostPeers() == N - 1);
    }
    {
      const Stats st = runUniform("pairwise", n, b);
      CHECK(st.messages == N * (N - 1));
      CHECK(st.rounds == n - 1);
      CHECK(st.busiestBytes() == (N - 1) * b);
      CHECK(st.mostPeers() == N - 1);
    }
    {
      const Stats st = runUniform("bruck", n, b);
      CHECK(st.messages == N * static_cast<std::size_t>(L));
      CHECK(st.rounds == L);
      for (int r = 0; r < n; ++r) {
        CHECK(st.sends[static_cast<std::size_t>(r)] == static_cast<std::size_t>(L));
        CHECK(st.bytesSent[static_cast<std::size_t>(r)] == bruckBlocksSent(n) * b);
        CHECK(st.peers[static_cast<std::size_t>(r)].size() == bruckPeers(n));
      }
      CHECK(st.mostPeers() <= 2 * static_cast<std::size_t>(L));
      // Packing and unpacking are strided steps, not one step per block: at
      // most two per direction and kind of run (a wrap or a short last run).
      for (int r = 0; r < n; ++r)
        CHECK(st.copySteps[static_cast<std::size_t>(r)] <= 8 * static_cast<std::size_t>(L) + 1);
    }
    for (int radix : {2, 3, 8, 64}) {
      INFO("tree radix " << radix);
      const Stats st = runUniform("tree", n, b, radix);
      CHECK(st.messages == 2 * (N - 1));
      CHECK(st.rounds == 2 * treeDepth(n, radix));
      CHECK(st.busiestBytes() == N * (N - 1) * b);  // rank 0 sends down every block not for itself
      for (int r = 1; r < n; ++r) {
        const auto node = dc::knomialNode(r, n, radix);
        CHECK(st.peers[static_cast<std::size_t>(r)].size() == 1 + node.children.size());
      }
      if (radix >= n) {  // flat: everyone talks to rank 0 only
        CHECK(st.peers[0].size() == N - 1);
        CHECK(st.mostPeers() == N - 1);
      }
      CHECK(st.mostPeers() <= static_cast<std::size_t>((radix - 1) * treeDepth(n, radix) + 1));
      CHECK(st.copySteps[0] <= 2 * N);  // rank 0 transposes a column per step
    }
  }
}

TEST_CASE("at 1000 and 4096 ranks a Bruck rank sends ceil(log2 N) messages to at most 2 ceil(log2 N) peers",
          "[unit][alltoall]") {
  for (int n : {1000, 1024, 4096}) {
    const int L = ceilLog2(n);
    for (int r : {0, 1, n / 2, n - 1}) {
      INFO("N=" << n << " rank " << r);
      dc::Plan p = recordRank("bruck", r, n, 64);
      std::size_t sends = 0, recvs = 0, bytes = 0;
      std::set<int> peers;
      std::set<std::pair<int, std::uint32_t>> keys;
      for (const auto& s : p.steps()) {
        if (s.kind == dc::Step::Kind::Send) ++sends, bytes += s.bytes, peers.insert(s.peer);
        if (s.kind == dc::Step::Kind::Recv) {
          ++recvs;
          peers.insert(s.peer);
          CHECK(keys.insert({s.peer, s.step}).second);
        }
      }
      CHECK(sends == static_cast<std::size_t>(L));
      CHECK(recvs == static_cast<std::size_t>(L));
      CHECK(bytes == bruckBlocksSent(n) * 64);
      CHECK(peers.size() == bruckPeers(n));
      CHECK(peers.size() <= 128);
    }
  }
}

TEST_CASE("at 1000 ranks the radix-64 tree all-to-all sends 2(N - 1) messages and no rank has 128 peers",
          "[unit][alltoall]") {
  const int n = 1000, radix = 64;
  std::size_t messages = 0, rootPeers = 0;
  for (int r = 0; r < n; ++r) {
    dc::Plan p = recordRank("tree", r, n, 1, radix);
    std::set<int> peers;
    for (const auto& s : p.steps()) {
      if (s.kind == dc::Step::Kind::Send) ++messages;
      if (s.kind == dc::Step::Kind::Send || s.kind == dc::Step::Kind::Recv) peers.insert(s.peer);
    }
    CHECK(peers.size() <= static_cast<std::size_t>(2 * (radix - 1) + 1));
    if (r == 0) rootPeers = peers.size();
  }
  CHECK(messages == 2 * static_cast<std::size_t>(n - 1));
  CHECK(rootPeers == 63 + 15);  // ranks 1..63, then 64, 128, .., 960
}

TEST_CASE(
    "all-to-all selection when ranks outnumber cores: tree or leaders by the cost model, where their blocks fit, "
    "else Bruck; "
    "pairwise for large blocks",
    "[unit][alltoall]") {
  auto pick = [](int n, bool cpuBound, std::size_t bytes, dc::Op op = dc::Op::Alltoall, const char* forced = nullptr) {
    Uniform u(n, bytes);
    dc::Call c = u.call();
    c.op = op;
    std::string name;
    for (int r = 0; r < n; ++r) {  // every rank chooses the same row
      dc::Shape s = shapeOf(r, n, 64);
      s.cpuBound = cpuBound;
      const std::string mine = dc::choose(s, c, forced)->name;
      if (r == 0) name = mine;
      CHECK(mine == name);
    }
    return name;
  };
  CHECK(pick(16, true, 64) == "tree");
  CHECK(pick(64, true, 64) == "tree");
  // From the cost model (table.hpp): the leaders row's three rounds beat the
  // tree's four past one level (from 65 ranks), while a leader's 3 G N blocks fit
  // 4 MiB; then the tree while rank 0's N^2 blocks fit 16 MiB; then Bruck.
  CHECK(pick(256, true, 64) == "leaders");
  CHECK(pick(512, true, 64) == "leaders");
  CHECK(pick(1024, true, 42) == "leaders");  // 3 x 32 x 1024 blocks of 42 B: under 4 MiB
  CHECK(pick(1024, true, 43) == "bruck");
  CHECK(pick(64, true, 4096) == "tree");
  CHECK(pick(65, true, 4096) == "bruck");
  CHECK(pick(64, true, 8192) == "bruck");
  CHECK(pick(1024, true, 0) == "tree");
  CHECK(pick(16, false, 64) == "bruck");
  CHECK(pick(256, false, 0) == "bruck");
  CHECK(pick(16, true, 64 * 1024) == "pairwise");
  CHECK(pick(16, false, 64 * 1024 - 1) == "bruck");
  CHECK(pick(16, false, 64, dc::Op::Alltoall, "linear") == "linear");
  CHECK(pick(16, true, 64, dc::Op::Alltoall, "bruck") == "bruck");
  // alltoallv: only the rows that forward nothing.
  CHECK(pick(16, true, 64, dc::Op::Alltoallv) == "linear");
  CHECK(pick(16, false, 64, dc::Op::Alltoallv) == "linear");
  CHECK(pick(16, false, 64 * 1024, dc::Op::Alltoallv) == "pairwise");
}

TEST_CASE("alltoallv with bruck or tree forced runs linear and delivers uneven blocks", "[unit][alltoall]") {
  for (const char* name : {"bruck", "tree"}) {
    for (int n : {1, 2, 5, 9}) {
      INFO(name << " N=" << n);
      auto count = [](int s, int d) { return static_cast<std::size_t>((s * 7 + d * 3) % 5); };
      std::vector<std::vector<std::size_t>> sc(n), sd(n), rc(n), rd(n);
      std::vector<dc::Plan> plans;
      std::vector<Memory> mem(static_cast<std::size_t>(n));
      for (int r = 0; r < n; ++r) {
        std::size_t st = 0, rt = 0;
        for (int p = 0; p < n; ++p) {
          sc[r].push_back(count(r, p));
          sd[r].push_back(st);
          st += count(r, p);
          rc[r].push_back(count(p, r));
          rd[r].push_back(rt);
          rt += count(p, r);
        }
        mem[r].in.resize(st);
        mem[r].out.assign(rt, 0xEE);
        for (int d = 0; d < n; ++d)
          for (std::size_t i = 0; i < sc[r][d]; ++i) mem[r].in[sd[r][d] + i] = pattern(r, d, i);
        dc::Call c;
        c.op = dc::Op::Alltoallv;
        c.bytes = 4;
        c.blocks = dc::Blocks{sc[r].data(), sd[r].data(), rc[r].data(), rd[r].data()};
        plans.push_back(dc::record(row(name), shapeOf(r, n, 64), c));
      }
      const Stats st = Replay(plans, mem).run();
      CHECK(st.messages == static_cast<std::size_t>(n) * static_cast<std::size_t>(n - 1));
      CHECK(st.rounds == (n > 1 ? 1 : 0));
      for (int r = 0; r < n; ++r)
        for (int s = 0; s < n; ++s)
          for (std::size_t i = 0; i < rc[r][s]; ++i) CHECK(mem[r].out[rd[r][s] + i] == pattern(s, r, i));
    }
  }
}

TEST_CASE("the plan replay rejects a repeated receive key, a length mismatch, a lost frame and a deadlock",
          "[unit][alltoall]") {
  using Catch::Matchers::Contains;
  auto replay = [](const std::function<void(dc::Plan&)>& rank0, const std::function<void(dc::Plan&)>& rank1) {
    std::vector<dc::Plan> plans{dc::Plan(0, 2), dc::Plan(1, 2)};
    rank0(plans[0]);
    rank1(plans[1]);
    std::vector<Memory> mem(2);
    for (auto& m : mem) m.in.assign(8, 1), m.out.assign(8, 0);
    Replay(plans, mem).run();
  };
  auto sendTwice = [](dc::Plan& p) {
    p.send(1, 0, dc::in(), 4);
    p.send(1, 1, dc::in(4), 4);
  };
  // The same (peer, step) received twice in one call: the full-key rule.
  REQUIRE_THROWS_WITH(replay(sendTwice,
                             [](dc::Plan& p) {
                               p.recv(0, 0, dc::out(), 4);
                               p.recv(0, 0, dc::out(4), 4);
                             }),
                      Contains("twice in one call"));
  REQUIRE_THROWS_WITH(
      replay([](dc::Plan& p) { p.send(1, 0, dc::in(), 4); }, [](dc::Plan& p) { p.recv(0, 0, dc::out(), 8); }),
      Contains("frame has 4"));
  REQUIRE_THROWS_WITH(replay(sendTwice, [](dc::Plan& p) { p.recv(0, 0, dc::out(), 4); }), Contains("never received"));
  REQUIRE_THROWS_WITH(replay([](dc::Plan& p) { p.recv(1, 0, dc::out(), 4); },
                             [](dc::Plan& p) {
                               p.recv(0, 0, dc::out(), 4);
                               p.settle();
                               p.send(0, 0, dc::in(), 4);
                             }),
                      Contains("deadlock"));
  REQUIRE_THROWS_WITH(replay([](dc::Plan& p) { p.send(1, 0, dc::in(), 4); },
                             [](dc::Plan& p) {
                               p.recv(0, 0, dc::out(), 4);
                               p.copy(dc::out(2), dc::in(), 4);
                             }),
                      Contains("before the settle"));
  REQUIRE_NOTHROW(replay(sendTwice, [](dc::Plan& p) {
    p.recv(0, 0, dc::out(), 4);
    p.recv(0, 1, dc::out(4), 4);
  }));
}

TEST_CASE(
    "the leaders all-to-all: about 2N messages, three rounds, a leader holds 3 G N blocks, not N^2, and talks to its "
    "members and the other leaders",
    "[unit][alltoall]") {
  for (int n : {2, 3, 5, 16, 17, 63, 64, 65, 100, 200}) {
    INFO("N=" << n);
    const int G = dc::leadersGroup(n), M = (n + G - 1) / G;
    CHECK(G * G >= n);
    const Stats st = runUniform("leaders", n, 3);
    CHECK(st.messages == static_cast<std::size_t>(2 * (n - M) + M * (M - 1)));
    CHECK(st.rounds <= 3);
    CHECK(st.mostPeers() <= static_cast<std::size_t>(G - 1 + M - 1));
  }
  for (int n : {1000, 1024}) {  // plans only: rank 0 leads 32 ranks, and its scratch is 3 G N blocks
    const dc::Plan leader = recordRank("leaders", 0, n, 64), member = recordRank("leaders", 1, n, 64);
    CHECK(dc::leadersGroup(n) == 32);
    CHECK(leader.scratchBytes() == 3u * 32u * static_cast<std::size_t>(n) * 64u);
    CHECK(leader.scratchBytes() < (8u << 20));
    CHECK(member.scratchBytes() == 0);
  }
}
