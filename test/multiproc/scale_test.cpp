// 256 forked ranks through the tree rendezvous and every collective, contents
// checked, under a link budget: each rank's open sockets, sampled after every
// call, must stay within the budget plus its listening socket and the soft
// budget's slack (kSlack). Deadlines only
// turn hangs into failures; nothing here is timed.
#include <dirent.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "multiproc.hpp"
#include "proc_stats.hpp"
#include "rendezvous/rendezvous.hpp"
#include "tether/tcp_bootstrap.hpp"

using namespace tether;
using test::expect;

namespace {

constexpr int kRanks = 256;
constexpr int kBudget = 64;  // TETHER_MAX_LINKS for this test
// The budget is soft: an incoming link is always admitted, and a closed link
// holds its socket until its goodbye is acknowledged (measured: at most 76
// sockets, listener included, over 256 ranks on a quiet host; 82-89 at load
// average 80-143, where acknowledgements come late, which failed a slack of
// kBudget / 4 in 1 of 4 runs on 064f117). What this bounds is growth with N
// (256 ranks, a link to each would be 256 sockets), so the slack is half the
// budget.
constexpr int kSlack = kBudget / 2;

long openSockets() {
  const long n = test::openSockets();
  if (n < 0) throw std::runtime_error("cannot read /proc/self/fd");
  return n;
}

std::uint32_t value(int src, int dst, int i) {
  return static_cast<std::uint32_t>(src) * 1000003u + static_cast<std::uint32_t>(dst) * 131u +
         static_cast<std::uint32_t>(i);
}

struct Peak {
  long sockets = 0;
  std::string after = "init";
  void sample(const char* op) {
    const long now = openSockets();
    if (now > sockets) sockets = now, after = op;
  }
};

void allgather(TcpBootstrap& b) {
  const int n = b.size(), r = b.rank();
  std::vector<std::uint32_t> buf(static_cast<std::size_t>(n), 0);
  buf[r] = value(r, -1, 0);
  b.allgather(buf.data(), sizeof(std::uint32_t));
  for (int s = 0; s < n; ++s) expect(buf[s] == value(s, -1, 0), "allgather: block of rank " + std::to_string(s));
}

void alltoall(TcpBootstrap& b) {
  const int n = b.size(), r = b.rank();
  std::vector<std::uint32_t> out(n), in(n, 0);
  for (int d = 0; d < n; ++d) out[d] = value(r, d, 0);
  b.alltoall(out.data(), in.data(), sizeof(std::uint32_t));
  for (int s = 0; s < n; ++s) expect(in[s] == value(s, r, 0), "alltoall: block from rank " + std::to_string(s));
}

// Rank s sends (s + d) % 3 words to rank d.
void alltoallv(TcpBootstrap& b) {
  const int n = b.size(), r = b.rank();
  std::vector<std::size_t> sc(n), sd(n), rc(n), rd(n);
  std::vector<std::uint32_t> out, in;
  std::size_t so = 0, ro = 0;
  for (int p = 0; p < n; ++p) {
    sc[p] = (r + p) % 3 * sizeof(std::uint32_t), sd[p] = so, so += sc[p];
    rc[p] = (p + r) % 3 * sizeof(std::uint32_t), rd[p] = ro, ro += rc[p];
    for (int i = 0; i < (r + p) % 3; ++i) out.push_back(value(r, p, i));
  }
  in.assign(ro / sizeof(std::uint32_t), 0);
  b.alltoallv(out.data(), sc.data(), sd.data(), in.data(), rc.data(), rd.data());
  for (int s = 0; s < n; ++s)
    for (int i = 0; i < (s + r) % 3; ++i)
      expect(in[rd[s] / sizeof(std::uint32_t) + i] == value(s, r, i),
             "alltoallv: word " + std::to_string(i) + " from rank " + std::to_string(s));
}

void broadcast(TcpBootstrap& b, int root) {
  std::vector<std::uint32_t> buf(300, 0);
  if (b.rank() == root)
    for (int i = 0; i < 300; ++i) buf[i] = value(root, -1, i);
  b.broadcast(buf.data(), buf.size() * sizeof(std::uint32_t), root);
  for (int i = 0; i < 300; ++i) expect(buf[i] == value(root, -1, i), "broadcast from rank " + std::to_string(root));
}

// Four communicators of 64 (color rank % 4), ordered by descending rank.
void split(TcpBootstrap& b) {
  const int r = b.rank();
  auto sub = b.split(r % 4, -r);
  expect(sub != nullptr && sub->size() == kRanks / 4, "split: size");
  expect(sub->rank() == kRanks / 4 - 1 - r / 4, "split: rank " + std::to_string(sub->rank()));
  std::vector<std::int32_t> who(sub->size(), -1);
  who[sub->rank()] = r;
  sub->allgather(who.data(), sizeof(std::int32_t));
  for (int i = 0; i < sub->size(); ++i)
    expect(who[i] == kRanks - 4 * (i + 1) + r % 4, "split: member " + std::to_string(i));
  sub->barrier();
}

}  // namespace

TEST_CASE("256 forked ranks: tree rendezvous, every collective, sockets within the link budget", "[multiproc][scale]") {
  ::setenv("TETHER_RENDEZVOUS", "tree", 1);
  ::setenv("TETHER_MAX_LINKS", std::to_string(kBudget).c_str(), 1);
  // alltoallv pairwise (its 8-byte blocks count as large): linear posts every
  // receive at once, so no link is idle and the soft budget cannot close one.
  // 4-byte allgather and alltoall blocks stay small (tree, on 2 cores).
  ::setenv("TETHER_ALGO", "broadcast=binomial,large_bytes=8", 1);
  // 256 processes on a loaded machine: a handshake may wait long for a CPU.
  ::setenv("TETHER_HANDSHAKE_TIMEOUT_MS", "60000", 1);
  auto res = test::runRanks(
      kRanks,
      [&](int rank, const UniqueId& id) {
        TcpOptions o;
        o.timeout = std::chrono::milliseconds(90000);
        TcpBootstrap b(rank, kRanks, id, o);
        Peak peak;
        peak.sample("init");
        allgather(b), peak.sample("allgather");
        alltoall(b), peak.sample("alltoall");
        alltoallv(b), peak.sample("alltoallv");
        broadcast(b, 0), peak.sample("broadcast");
        broadcast(b, 201), peak.sample("broadcast");
        b.barrier(), peak.sample("barrier");
        split(b), peak.sample("split");
        allgather(b), peak.sample("allgather");
        b.barrier();
        // The links, the listening socket and the soft budget's slack.
        expect(peak.sockets <= kBudget + 1 + kSlack, "rank " + std::to_string(rank) + ": " +
                                                         std::to_string(peak.sockets) + " sockets open after " +
                                                         peak.after + ", budget " + std::to_string(kBudget) +
                                                         " links + 1 listener + " + std::to_string(kSlack));
      },
      std::chrono::seconds(170));
  INFO(test::summary(res));
  REQUIRE(test::allOk(res));
}

TEST_CASE("tree rendezvous: every rank but the root is the child of its parent, once", "[rendezvous][tree]") {
  for (int radix : {2, 3, 8, 64})
    for (int n : {1, 2, 7, 8, 9, 63, 64, 65, 300, 1024}) {
      std::vector<int> seen(n, 0);
      for (int r = 0; r < n; ++r)
        for (int c : rdv::treeChildren(r, n, radix)) {
          INFO("radix " << radix << " n " << n << " rank " << r << " child " << c);
          REQUIRE(c > r);
          REQUIRE(c < n);
          REQUIRE(rdv::treeParent(c, radix) == r);
          ++seen[c];
        }
      REQUIRE(rdv::treeParent(0, radix) == -1);
      for (int r = 1; r < n; ++r) REQUIRE(seen[r] == 1);
      REQUIRE(seen[0] == 0);
    }
}

TEST_CASE("tree rendezvous of radix 2 over 9 ranks, then an all-gather", "[multiproc][rendezvous][tree]") {
  ::setenv("TETHER_RENDEZVOUS", "tree", 1);
  auto res = test::runRanks(9, [](int rank, const UniqueId& id) {
    TcpOptions o;
    o.timeout = std::chrono::milliseconds(60000);
    o.rendezvousTreeRadix = 2;
    TcpBootstrap b(rank, 9, id, o);
    allgather(b);
    b.barrier();
  });
  INFO(test::summary(res));
  REQUIRE(test::allOk(res));
}

TEST_CASE("tree rendezvous with a rank missing: the root names it", "[multiproc][rendezvous][tree]") {
  ::setenv("TETHER_RENDEZVOUS", "tree", 1);
  auto res = test::runRanks(3, [](int rank, const UniqueId& id) {
    if (rank == 2) return;  // never joins a world of 4
    TcpOptions o;
    o.timeout = std::chrono::milliseconds(rank == 0 ? 4000 : 10000);  // the root's deadline first
    try {
      TcpBootstrap b(rank, 4, id, o);
    } catch (const Error& e) {
      const std::string what = e.what();
      // Rank 1 is named too when a loaded host starts it after the root's
      // deadline; ranks 2 and 3 must be named either way.
      if (rank == 0)
        expect(what.find("rank 0: rendezvous") != std::string::npos &&
                   (what.find("missing ranks: 2, 3") != std::string::npos ||
                    what.find("missing ranks: 1, 2, 3") != std::string::npos),
               "root: " + what);
      return;
    }
    expect(false, "rank " + std::to_string(rank) + " joined a world with ranks missing");
  });
  INFO(test::summary(res));
  REQUIRE(test::allOk(res));
}

TEST_CASE("an unknown TETHER_RENDEZVOUS names the value and the choices", "[multiproc][rendezvous]") {
  ::setenv("TETHER_RENDEZVOUS", "bogus", 1);
  auto res = test::runRanks(1, [](int rank, const UniqueId& id) {
    try {
      TcpBootstrap b(rank, 1, id, TcpOptions{});
    } catch (const Error& e) {
      const std::string what = e.what();
      expect(e.code() == ErrorCode::InvalidArgument && what.find("'bogus'") != std::string::npos &&
                 what.find("root, tree, pmix or auto") != std::string::npos,
             what);
      return;
    }
    expect(false, "accepted TETHER_RENDEZVOUS=bogus");
  });
  ::setenv("TETHER_RENDEZVOUS", "tree", 1);
  INFO(test::summary(res));
  REQUIRE(test::allOk(res));
}
