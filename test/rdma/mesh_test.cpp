// The full bring-up across ranks that are threads (tether::testing::InProcessWorld),
// each with its own fake device: N-1 QPs per rank at RTS, MR all-gather, and an
// RDMA-write all-gather checked byte for byte.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>

#include "bringup_snippet.hpp"  // docs/rdma.md, verbatim
#include "tampering_bootstrap.hpp"
#include "tether/error.hpp"
#include "tether/rdma/fake_verbs.hpp"
#include "tether/rdma/mesh.hpp"
#include "tether/testing/in_process.hpp"

using namespace tether::rdma;
using tether::Bootstrap;
using tether::Error;
using tether::ErrorCode;
using tether::testing::InProcessWorld;

namespace {

unsigned char pattern(int rank, std::size_t i) { return static_cast<unsigned char>(rank * 31 + i * 7 + 1); }

// Runs `body` and returns the message of the tether::Error it throws ("" if none).
template <typename F>
std::string failureOf(F&& body) {
  try {
    body();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("every rank brings N-1 RC QPs to RTS and RDMA-writes an all-gather", "[rdma][mesh]") {
  for (const bool roce : {true, false}) {
    for (const int n : {2, 5}) {
      INFO((roce ? "RoCE" : "InfiniBand") << " n=" << n);
      InProcessWorld world(n);
      std::atomic<int> atRts{0};
      world.run([&](Bootstrap& boot) {
        FakeVerbs verbs(roce ? FakeFabric::roce() : FakeFabric::infiniband());
        Context context(verbs, Config{}, boot.rank(), n - 1);
        Mesh mesh = connectMesh(boot, context);
        atRts += mesh.connected();
        for (int peer = 0; peer < n; ++peer)
          if (peer != boot.rank()) REQUIRE(verbs.qpState(mesh.qps[peer]->handle()) == IBV_QPS_RTS);

        constexpr std::size_t kBlock = 1000;
        std::vector<unsigned char> buffer(kBlock * n, 0);
        for (std::size_t i = 0; i < kBlock; ++i) buffer[boot.rank() * kBlock + i] = pattern(boot.rank(), i);
        MemoryRegion mr(context, buffer.data(), buffer.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
        const auto records = exchangeMemoryRegions(boot, mr, buffer.size());
        REQUIRE(records.size() == static_cast<std::size_t>(n));
        rdmaWriteAllgather(boot, context, mesh, mr, kBlock, records);
        for (int r = 0; r < n; ++r)
          for (std::size_t i = 0; i < kBlock; ++i)
            if (buffer[r * kBlock + i] != pattern(r, i))
              FAIL("rank " << boot.rank() << " block " << r << " byte " << i);
        boot.barrier();  // no rank tears its MR down while others may still write
      });
      CHECK(atRts.load() == n * (n - 1));
    }
  }
}

TEST_CASE("the step-by-step bring-up of docs/rdma.md connects every pair and carries an RDMA-write all-gather",
          "[rdma][mesh]") {
  constexpr int n = 4;
  InProcessWorld world(n);
  world.run([&](Bootstrap& boot) {
    FakeVerbs verbs(FakeFabric::roce());
    Context context(verbs, Config{}, boot.rank(), n - 1);
    constexpr std::size_t kBlock = 256;
    std::vector<unsigned char> buffer(kBlock * n, 0);
    for (std::size_t i = 0; i < kBlock; ++i) buffer[boot.rank() * kBlock + i] = pattern(boot.rank(), i);
    MemoryRegion mr(context, buffer.data(), buffer.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    Connection c = connectStepByStep(boot, context, mr);
    Mesh mesh{std::move(c.qps)};
    REQUIRE(mesh.connected() == n - 1);
    rdmaWriteAllgather(boot, context, mesh, mr, kBlock, c.regions);
    for (int r = 0; r < n; ++r)
      for (std::size_t i = 0; i < kBlock; ++i)
        if (buffer[r * kBlock + i] != pattern(r, i)) FAIL("rank " << boot.rank() << " block " << r << " byte " << i);
    boot.barrier();
  });
}

TEST_CASE("a zeroed record in the exchange is rejected on the receiving rank, naming the peer", "[rdma][mesh]") {
  InProcessWorld world(4);
  std::atomic<int> modifiesOnRank1{-1};
  const std::string message = failureOf([&] {
    world.run([&](Bootstrap& boot) {
      FakeVerbs verbs(FakeFabric::roce());
      Context context(verbs, Config{}, boot.rank(), 3);
      // Rank 1 receives peer 3's record as zeros.
      tether::test::TamperingBootstrap tampered(boot, [&](unsigned char* recv, std::size_t bytes) {
        if (boot.rank() == 1) std::memset(recv + 3 * bytes, 0, bytes);
      });
      try {
        connectMesh(tampered, context);
      } catch (...) {
        if (boot.rank() == 1) modifiesOnRank1 = verbs.modifyQpCalls();
        throw;
      }
    });
  });
  CHECK_THAT(message, Catch::Contains("rank 1: rdma qp-exchange: QP record from peer 3 has magic = 0x0"));
  CHECK(modifiesOnRank1.load() == 0);
}

TEST_CASE("a swapped record (another pair's payload) is rejected by its ranks", "[rdma][mesh]") {
  InProcessWorld world(3);
  const std::string message = failureOf([&] {
    world.run([&](Bootstrap& boot) {
      FakeVerbs verbs(FakeFabric::roce());
      Context context(verbs, Config{}, boot.rank(), 2);
      // Rank 2 gets peer 0's and peer 1's records swapped.
      tether::test::TamperingBootstrap tampered(boot, [&](unsigned char* recv, std::size_t bytes) {
        if (boot.rank() == 2) std::swap_ranges(recv, recv + bytes, recv + bytes);
      });
      connectMesh(tampered, context);
    });
  });
  CHECK_THAT(message, Catch::Contains("rank 2: rdma qp-exchange: QP record from peer 0 has srcRank = 1"));
}

TEST_CASE("ranks without devices exchange placeholder records", "[rdma][mesh]") {
  InProcessWorld world(4);
  std::atomic<int> done{0};
  world.run([&](Bootstrap& boot) {
    exchangePlaceholders(boot);
    ++done;
  });
  CHECK(done.load() == 4);

  InProcessWorld mixed(2);
  const std::string message = failureOf([&] {
    mixed.run([&](Bootstrap& boot) {
      if (boot.rank() == 0) {
        exchangePlaceholders(boot);
      } else {
        FakeVerbs verbs(FakeFabric::roce());
        Context context(verbs, Config{}, boot.rank(), 1);
        connectMesh(boot, context);
      }
    });
  });
  CHECK_THAT(message, Catch::Contains("from peer 1 has flags = 0x0") || Catch::Contains("from peer 0 has flags = 0x1"));
}
