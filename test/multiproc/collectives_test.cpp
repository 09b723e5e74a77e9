// Every collective on forked local ranks, N = 1, 2, 3, 5, 8, 16, payloads
// 0 B, 1 B, 4 KiB, 4 MiB, with every received byte checked.
// TETHER_TEST_LARGE_BYTES replaces the 4 MiB payload: the sanitizer runs use
// 256 KiB (.ci/sanitizers.sh), still past the 64 KiB at which frames are sent
// by reference and read in several pieces, at a fraction of the time.
#include <catch2/catch.hpp>

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <thread>
#include <numeric>
#include <vector>

#include "multiproc.hpp"

using namespace tether;
using test::expect;

namespace {

std::size_t largeBytes() {
  const char* v = std::getenv("TETHER_TEST_LARGE_BYTES");
  return v ? std::strtoull(v, nullptr, 10) : std::size_t{4} << 20;
}

const std::vector<std::size_t> kSizes = {0, 1, 4096, largeBytes()};

unsigned char pattern(int src, int dst, std::size_t i) {
  return static_cast<unsigned char>(src * 131 + dst * 17 + i * 7 + (i >> 8));
}

TcpOptions opts() {
  TcpOptions o;
  o.timeout = std::chrono::milliseconds(60000);
  return o;
}

void runChecked(int n, const std::function<void(TcpBootstrap&)>& body, const char* env = nullptr,
                const char* env2 = nullptr) {
  auto res = test::runRanks(
      n,
      [&](int rank, const UniqueId& id) {
        if (env) ::putenv(const_cast<char*>(env));
        if (env2) ::putenv(const_cast<char*>(env2));
        TcpBootstrap b(rank, n, id, opts());
        body(b);
        b.barrier();
      },
      std::chrono::seconds(120));
  INFO("n=" << n << "\n" << test::summary(res));
  REQUIRE(test::allOk(res));
}

void checkAllgather(TcpBootstrap& b) {
  const int n = b.size(), r = b.rank();
  for (auto bytes : kSizes) {
    std::vector<unsigned char> buf(n * bytes, 0xEE);
    for (std::size_t i = 0; i < bytes; ++i) buf[r * bytes + i] = pattern(r, -1, i);
    b.allgather(buf.data(), bytes);
    for (int s = 0; s < n; ++s)
      for (std::size_t i = 0; i < bytes; ++i)
        if (buf[s * bytes + i] != pattern(s, -1, i))
          expect(false, "allgather " + std::to_string(bytes) + " B: block of rank " + std::to_string(s) + " byte " +
                            std::to_string(i));
  }
}

void checkAlltoallSizes(TcpBootstrap& b, const std::vector<std::size_t>& sizes) {
  const int n = b.size(), r = b.rank();
  for (auto bytes : sizes) {
    std::vector<unsigned char> send(n * bytes), recv(n * bytes, 0xEE);
    for (int d = 0; d < n; ++d)
      for (std::size_t i = 0; i < bytes; ++i) send[d * bytes + i] = pattern(r, d, i);
    b.alltoall(send.data(), recv.data(), bytes);
    for (int s = 0; s < n; ++s)
      for (std::size_t i = 0; i < bytes; ++i)
        if (recv[s * bytes + i] != pattern(s, r, i))
          expect(false, "alltoall " + std::to_string(bytes) + " B from rank " + std::to_string(s) + " byte " +
                            std::to_string(i));
  }
}

void checkAlltoall(TcpBootstrap& b) { checkAlltoallSizes(b, kSizes); }

// Rank s sends count(s, d) bytes to rank d: uneven, some zero.
std::size_t vcount(int s, int d, std::size_t scale) { return ((s * 7 + d * 3) % 5) * scale; }

void checkAlltoallv(TcpBootstrap& b) {
  const int n = b.size(), r = b.rank();
  for (std::size_t scale : {std::size_t{1}, std::size_t{1000}, std::min<std::size_t>(300000, largeBytes() / 4)}) {
    std::vector<std::size_t> sc(n), sd(n), rc(n), rd(n);
    std::size_t st = 0, rt = 0;
    for (int p = 0; p < n; ++p) {
      sc[p] = vcount(r, p, scale);
      sd[p] = st;
      st += sc[p];
      rc[p] = vcount(p, r, scale);
      rd[p] = rt;
      rt += rc[p];
    }
    std::vector<unsigned char> send(st + 1), recv(rt + 1, 0xEE);
    for (int d = 0; d < n; ++d)
      for (std::size_t i = 0; i < sc[d]; ++i) send[sd[d] + i] = pattern(r, d, i);
    b.alltoallv(send.data(), sc.data(), sd.data(), recv.data(), rc.data(), rd.data());
    for (int s = 0; s < n; ++s)
      for (std::size_t i = 0; i < rc[s]; ++i)
        if (recv[rd[s] + i] != pattern(s, r, i))
          expect(false, "alltoallv scale " + std::to_string(scale) + " from rank " + std::to_string(s));
  }
}

void checkBroadcast(TcpBootstrap& b) {
  const int n = b.size(), r = b.rank();
  for (auto bytes : kSizes) {
    for (int root : {0, n - 1, n / 2}) {
      std::vector<unsigned char> buf(bytes, 0xEE);
      if (r == root)
        for (std::size_t i = 0; i < bytes; ++i) buf[i] = pattern(root, -2, i);
      b.broadcast(buf.data(), bytes, root);
      for (std::size_t i = 0; i < bytes; ++i)
        if (buf[i] != pattern(root, -2, i))
          expect(false, "broadcast " + std::to_string(bytes) + " B from root " + std::to_string(root) + " byte " +
                            std::to_string(i));
    }
  }
}

}  // namespace

TEST_CASE("allgather on forked ranks", "[multiproc][allgather]") {
  int n = GENERATE(1, 2, 3, 5, 8, 16);
  runChecked(n, checkAllgather);
}

TEST_CASE("allgather with each algorithm forced", "[multiproc][allgather]") {
  const char* env = GENERATE("TETHER_ALGO=allgather=ring", "TETHER_ALGO=allgather=bruck", "TETHER_ALGO=allgather=tree",
                             "TETHER_ALGO=allgather=linear");
  int n = GENERATE(2, 3, 8, 13);
  INFO(env);
  runChecked(n, checkAllgather, env);
}

TEST_CASE("tree allgather and barrier with each radix", "[multiproc][allgather][barrier]") {
  // Radix 2 is binomial, 3 leaves partial levels, 64 is flat for these sizes.
  const char* radix = GENERATE("TETHER_ALGO=allgather=tree,tree_radix=2", "TETHER_ALGO=allgather=tree,tree_radix=3",
                               "TETHER_ALGO=allgather=tree,tree_radix=64");
  int n = GENERATE(2, 5, 11);
  INFO(radix);
  runChecked(
      n,
      [](TcpBootstrap& b) {
        checkAllgather(b);
        b.barrier();
      },
      radix);
}

TEST_CASE("alltoall on forked ranks", "[multiproc][alltoall]") {
  int n = GENERATE(1, 2, 3, 5, 8, 16);
  runChecked(n, checkAlltoall);
}

TEST_CASE("alltoall with each window forced", "[multiproc][alltoall]") {
  const char* env = GENERATE("TETHER_ALGO=alltoall=linear", "TETHER_ALGO=alltoall=pairwise");
  INFO(env);
  runChecked(5, checkAlltoall, env);
}

TEST_CASE("alltoall with each forwarding algorithm forced", "[multiproc][alltoall]") {
  // Bruck forwards blocks through log2 N peers; the tree gathers to rank 0,
  // transposes and scatters (radix 64: flat; radix 2: binomial, inner ranks).
  // Sizes up to past 64 KiB (frames sent by reference), not 4 MiB: rank 0 of
  // the tree holds 2 N (N - 1) blocks.
  const char* env = GENERATE("TETHER_ALGO=alltoall=bruck,tree_radix=0", "TETHER_ALGO=alltoall=tree,tree_radix=64",
                             "TETHER_ALGO=alltoall=tree,tree_radix=2");
  int n = GENERATE(2, 3, 8, 13);
  INFO(env);
  runChecked(
      n,
      [](TcpBootstrap& b) {
        checkAlltoallSizes(b, {0, 1, 7, 64, 4096, 70000});
      },
      env);
}

TEST_CASE("alltoallv with a forwarding algorithm forced runs linear", "[multiproc][alltoallv]") {
  const char* env = GENERATE("TETHER_ALGO=alltoall=bruck", "TETHER_ALGO=alltoall=tree");
  INFO(env);
  runChecked(5, checkAlltoallv, env);
}

TEST_CASE("alltoallv on forked ranks", "[multiproc][alltoallv]") {
  int n = GENERATE(1, 2, 3, 5, 8, 16);
  runChecked(n, checkAlltoallv);
}

TEST_CASE("broadcast on forked ranks", "[multiproc][broadcast]") {
  int n = GENERATE(1, 2, 3, 5, 8, 16);
  runChecked(n, checkBroadcast);
}

TEST_CASE("broadcast with each algorithm forced", "[multiproc][broadcast]") {
  const char* env = GENERATE("TETHER_ALGO=broadcast=pipeline", "TETHER_ALGO=broadcast=binomial");
  INFO(env);
  runChecked(5, checkBroadcast, env);
}

TEST_CASE(
    "frames an algorithm combines past TETHER_MAX_PAYLOAD_BYTES go in parts: every algorithm, a valid call never fails",
    "[multiproc][allgather][alltoall][broadcast]") {
  // 8 ranks, 300,000 B blocks, a 1 MiB limit: every block is under it, but
  // bruck (allgather and alltoall) combines up to 4 blocks, the trees send
  // whole buffers (2.4 MB) and the binomial broadcast sends 2.4 MB whole
  // (the pipeline's 256 KiB chunks stay under the limit).
  const char* algorithm =
      GENERATE("TETHER_ALGO=allgather=ring", "TETHER_ALGO=allgather=bruck", "TETHER_ALGO=allgather=tree",
               "TETHER_ALGO=allgather=linear", "TETHER_ALGO=alltoall=bruck", "TETHER_ALGO=alltoall=tree",
               "TETHER_ALGO=alltoall=pairwise", "TETHER_ALGO=alltoall=linear", "TETHER_ALGO=broadcast=binomial",
               "TETHER_ALGO=broadcast=pipeline");
  INFO(algorithm);
  constexpr std::size_t kBlock = 300000;
  runChecked(
      8,
      [](TcpBootstrap& b) {
        const int n = b.size(), r = b.rank();
        std::vector<unsigned char> all(n * kBlock);
        for (std::size_t i = 0; i < kBlock; ++i) all[r * kBlock + i] = pattern(r, 0, i);
        b.allgather(all.data(), kBlock);
        for (int src = 0; src < n; ++src)
          for (std::size_t i = 0; i < kBlock; ++i)
            if (all[src * kBlock + i] != pattern(src, 0, i))
              expect(false, "allgather block " + std::to_string(src) + " byte " + std::to_string(i));
        checkAlltoallSizes(b, {kBlock});
        std::vector<unsigned char> data(n * kBlock);
        if (r == 3)
          for (std::size_t i = 0; i < data.size(); ++i) data[i] = pattern(3, 1, i);
        b.broadcast(data.data(), data.size(), 3);
        for (std::size_t i = 0; i < data.size(); ++i)
          if (data[i] != pattern(3, 1, i)) expect(false, "broadcast byte " + std::to_string(i));
      },
      algorithm, "TETHER_MAX_PAYLOAD_BYTES=1048576");
}

TEST_CASE("barrier: no rank leaves before every rank has entered", "[multiproc][barrier]") {
  int n = GENERATE(1, 2, 3, 5, 8, 16);
  const char* env = GENERATE("TETHER_ALGO=barrier=dissemination", "TETHER_ALGO=barrier=tree");
  INFO(env);
  constexpr int kRounds = 5;
  // Shared with the forked ranks: entry and exit times (monotonic clock, the
  // same across processes) of every rank in every round.
  auto* times = static_cast<std::int64_t*>(::mmap(nullptr, sizeof(std::int64_t) * 2 * kRounds * 16,
                                                  PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  REQUIRE(times != MAP_FAILED);
  auto now = [] { return std::chrono::steady_clock::now().time_since_epoch().count(); };
  runChecked(
      n,
      [&](TcpBootstrap& b) {
        for (int round = 0; round < kRounds; ++round) {
          // A different straggler each round.
          if (b.rank() == round % b.size()) std::this_thread::sleep_for(std::chrono::milliseconds(30));
          times[(round * 16 + b.rank()) * 2] = now();
          b.barrier();
          times[(round * 16 + b.rank()) * 2 + 1] = now();
        }
      },
      env);
  for (int round = 0; round < kRounds; ++round) {
    std::int64_t lastEntry = 0, firstExit = INT64_MAX;
    for (int r = 0; r < n; ++r) {
      lastEntry = std::max(lastEntry, times[(round * 16 + r) * 2]);
      firstExit = std::min(firstExit, times[(round * 16 + r) * 2 + 1]);
    }
    INFO("round " << round);
    CHECK(firstExit >= lastEntry);
  }
  ::munmap(times, sizeof(std::int64_t) * 2 * kRounds * 16);
}
