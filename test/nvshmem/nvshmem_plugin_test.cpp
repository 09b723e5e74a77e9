// nvshmem_bootstrap_tether.so.3 loaded with dlopen/dlsym as NVSHMEM 3.x loads
// it: alltoall + barrier on 8 forked ranks through chaos proxies with every
// record checked, global_exit, ABI version checks and bad arguments.
//
//   TETHER_NVSHMEM_ITERS  iterations of the chaos run (default 10000, about
//                         70 s on 2 idle cores; meson runs 4000, and 1000
//                         under sanitizers)
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "multiproc.hpp"
#include "plugin_loader.hpp"
#include "plugin_ranks.hpp"

using namespace tether::test;

namespace {

std::uint64_t iterations() {
  const char* text = std::getenv("TETHER_NVSHMEM_ITERS");
  return text ? std::strtoull(text, nullptr, 10) : 10000;
}

}  // namespace

TEST_CASE("alltoall of 64-byte records + barrier through the plug-in and chaos proxies swaps no record on 8 ranks",
          "[nvshmem][nvshmem-plugin]") {
  StressConfig config;
  config.nranks = 8;
  config.iterations = iterations();
  UidPipes pipes(config.nranks);
  RankTally* tallies = sharedTallies(config.nranks);
  // The all-pairs rows (the seeds' pattern): the automatic tree rows on a
  // host with more ranks than cores talk to rank 0 only, over the links of the
  // rendezvous, and no link would go through the chaos proxies.
  ::setenv("TETHER_ALGO", "alltoall=linear,barrier=dissemination", 1);
  std::fflush(nullptr);
  auto start = std::chrono::steady_clock::now();
  auto results = runRanks(
      config.nranks, [&](int rank, const tether::UniqueId&) { stressRank(rank, config, pipes, tallies); },
      std::chrono::seconds(170));  // meson's timeout is 180 s
  ::unsetenv("TETHER_ALGO");
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  RankTally total;
  for (int r = 0; r < config.nranks; ++r) {
    total.records += tallies[r].records;
    total.swapped += tallies[r].swapped;
    total.proxyAccepted += tallies[r].proxyAccepted;
    total.proxyPieces += tallies[r].proxyPieces;
    total.proxyReordered += tallies[r].proxyReordered;
    CHECK(tallies[r].iterations == config.iterations);
  }
  std::printf(
      "nvshmem plug-in: %d ranks, %llu iterations of alltoall(64 B records) + barrier in %.1f s; "
      "%llu records checked, %llu swapped; proxies: %llu connections, %llu pieces, %llu reordered batches\n",
      config.nranks, static_cast<unsigned long long>(config.iterations), seconds,
      static_cast<unsigned long long>(total.records), static_cast<unsigned long long>(total.swapped),
      static_cast<unsigned long long>(total.proxyAccepted), static_cast<unsigned long long>(total.proxyPieces),
      static_cast<unsigned long long>(total.proxyReordered));
  freeTallies(tallies, config.nranks);
  INFO(summary(results));
  CHECK(allOk(results));
  CHECK(total.swapped == 0);
  CHECK(total.records == config.iterations * 64);
  CHECK(total.proxyAccepted > 0);  // links really went through the proxies
}

TEST_CASE("global_exit from one rank aborts the others' barrier naming it, and exits with the status",
          "[nvshmem][nvshmem-plugin]") {
  const int nranks = 4, victim = 2, status = 7;
  UidPipes pipes(nranks);
  std::fflush(nullptr);
  auto results = runRanks(
      nranks, [&](int rank, const tether::UniqueId&) { globalExitRank(rank, nranks, victim, status, pipes); },
      std::chrono::seconds(60));
  INFO(summary(results));
  for (const auto& r : results) CHECK(r.exitCode == (r.rank == victim ? status : 0));
}

TEST_CASE("the plug-in refuses a loader of another ABI major version and accepts another minor",
          "[nvshmem][nvshmem-plugin]") {
  NvshmemPlugin plugin;
  bootstrap_handle_t handle{};
  CHECK(plugin.preInit(&handle, 20000) != 0);
  CHECK_THAT(plugin.lastError(), Catch::Contains("pre_init: loader ABI version 20000 (2.0.0) is incompatible"));
  CHECK(plugin.preInit(&handle, 40102) != 0);
  CHECK_THAT(plugin.lastError(), Catch::Contains("(4.1.2)"));
  NvshmemUid uid;
  auto args = uidArgs(uid, 0, 1);
  CHECK(plugin.init(&args, &handle, 29999) != 0);
  CHECK_THAT(plugin.lastError(), Catch::Contains("init: loader ABI version 29999 (2.99.99) is incompatible"));
  CHECK(handle.pre_init_ops == nullptr);  // nothing was touched
  REQUIRE(plugin.preInit(&handle, 30100) == 0);
  CHECK(handle.pre_init_ops != nullptr);
  bootstrap_handle_t other{};
  CHECK(plugin.preInit(&other, 30000) == 0);  // the loader's own ops struct is kept
  bootstrap_init_ops_t mine{};
  other.pre_init_ops = &mine;
  CHECK(plugin.preInit(&other, 30000) == 0);
  CHECK(other.pre_init_ops == &mine);
  CHECK(mine.get_unique_id != nullptr);
}

TEST_CASE("bad arguments to the plug-in return non-zero with a message instead of exiting",
          "[nvshmem][nvshmem-plugin]") {
  NvshmemPlugin plugin;
  bootstrap_handle_t handle{};
  CHECK(plugin.preInit(nullptr, TETHER_NVSHMEM_ABI_VERSION) != 0);
  CHECK_THAT(plugin.lastError(), Catch::Contains("handle is NULL"));
  REQUIRE(plugin.preInit(&handle, TETHER_NVSHMEM_ABI_VERSION) == 0);
  auto getUid = handle.pre_init_ops->get_unique_id;
  CHECK(getUid(nullptr) != 0);
  CHECK_THAT(plugin.lastError(), Catch::Contains("unique id is NULL"));

  NvshmemUid uid;
  REQUIRE(getUid(uid.bytes) == 0);
  NvshmemUid unversioned = uid;
  std::memset(unversioned.bytes, 0, 4);
  auto unversionedArgs = uidArgs(unversioned, 0, 1);
  CHECK(plugin.init(&unversionedArgs, &handle, TETHER_NVSHMEM_ABI_VERSION) != 0);
  CHECK_THAT(plugin.lastError(), Catch::Contains("init: unique id version 0, expected 65664"));
  CHECK(plugin.init(nullptr, &handle, TETHER_NVSHMEM_ABI_VERSION) != 0);
  CHECK_THAT(plugin.lastError(), Catch::Contains("arg is NULL"));
  auto args = uidArgs(uid, 5, 4);
  CHECK(plugin.init(&args, &handle, TETHER_NVSHMEM_ABI_VERSION) != 0);
  CHECK_THAT(plugin.lastError(), Catch::Contains("rank 5 of 4 ranks is not valid"));
  NvshmemUid damaged = uid;
  damaged.bytes[60] ^= 0xff;
  args = uidArgs(damaged, 0, 1);
  CHECK(plugin.init(&args, &handle, TETHER_NVSHMEM_ABI_VERSION) == TETHER_ERR_INVALID_ARGUMENT);
  CHECK_THAT(plugin.lastError(), Catch::Contains("invalid tether UniqueId"));

  // A one-rank world, then the operations' own checks.
  args = uidArgs(uid, 0, 1);
  REQUIRE(plugin.init(&args, &handle, TETHER_NVSHMEM_ABI_VERSION) == 0);
  CHECK(plugin.init(&args, &handle, TETHER_NVSHMEM_ABI_VERSION) != 0);
  CHECK_THAT(plugin.lastError(), Catch::Contains("already initialised"));
  long value = 3, out = 0;
  CHECK(handle.allgather(&value, &out, -8, &handle) != 0);
  CHECK_THAT(plugin.lastError(), Catch::Contains("rank 0: allgather: negative size -8"));
  CHECK(handle.allgather(nullptr, &out, 8, &handle) != 0);
  CHECK_THAT(plugin.lastError(), Catch::Contains("sendbuf is NULL"));
  CHECK(handle.alltoall(&value, nullptr, 8, &handle) != 0);
  CHECK_THAT(plugin.lastError(), Catch::Contains("rank 0: alltoall: recvbuf is NULL"));
  CHECK(handle.barrier(nullptr) != 0);
  CHECK(handle.allgather(&value, &out, sizeof value, &handle) == 0);
  CHECK(out == 3);
  CHECK(handle.alltoall(&value, &value, sizeof value, &handle) == 0);  // overlapping buffers are copied
  CHECK(value == 3);
  REQUIRE(handle.finalize(&handle) == 0);
  CHECK(handle.pre_init_ops == nullptr);  // the plug-in freed what it allocated
  CHECK(handle.barrier(&handle) != 0);
  CHECK_THAT(plugin.lastError(), Catch::Contains("barrier: the handle is not initialised"));
  CHECK(plugin.setOptions(nullptr) == 0);
  tether_options_t zeroed{};
  CHECK(plugin.setOptions(&zeroed) != 0);
  CHECK_THAT(plugin.lastError(), Catch::Contains("struct_size is 0"));
}
