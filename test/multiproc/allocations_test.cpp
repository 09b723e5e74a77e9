// Heap allocations of steady-state calls (issue 24): all-gathers of small and
// 8 KiB blocks, an all-to-all, a broadcast with a barrier, blocking sends and
// receives around a ring. 8 ranks on
// threads of this process, each a TcpBootstrap over real loopback TCP. The
// global operator new is replaced by a counting one (every thread), and after
// a warm-up the allocations of the next calls are counted, all ranks
// together. The count is deterministic enough to assert (no timing in it):
// it is what the frame path allocates per call.
#include <catch2/catch.hpp>

#include <atomic>
#include <barrier>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "tether/tcp_bootstrap.hpp"

namespace {

std::atomic<std::uint64_t> allocations{0};

void* counted(std::size_t n) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}

void* countedAligned(std::size_t n, std::align_val_t a) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  const auto align = static_cast<std::size_t>(a);
  if (void* p = std::aligned_alloc(align, (n + align - 1) / align * align)) return p;
  throw std::bad_alloc();
}

}  // namespace

void* operator new(std::size_t n) { return counted(n); }
void* operator new[](std::size_t n) { return counted(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
void* operator new(std::size_t n, std::align_val_t a) { return countedAligned(n, a); }
void* operator new[](std::size_t n, std::align_val_t a) { return countedAligned(n, a); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace {

constexpr int kRanks = 8;
constexpr int kWarmup = 200;
// The most heap allocations per rank per call this test accepts (issue 24's
// goal is 1; docs/benchmarks.md has the measured figures). The frame path
// allocates nothing (0 of 16,000 rank-calls in most runs): what is left is a
// call that starts before the progress thread dropped the last call's op
// (ReusedCall then gives it a pair of its own), a few in 16,000.
constexpr double kMostPerRankPerCall = 0.05;

enum class Kind { Allgather, Alltoall, Broadcast, Ring, NonblockingRing };

// Heap allocations per rank per call of `counted` steady-state all-gathers
// (all-to-alls, broadcasts from rank 0 of kRanks blocks each followed by a
// barrier; blocking sends of one block to the next rank and receives from the
// previous one) of `bytes` per rank and block, all ranks together, after
// kWarmup calls.
double allocationsPerRankPerCall(std::size_t bytes, int counted, Kind kind = Kind::Allgather) {
  const tether::UniqueId id = tether::TcpBootstrap::createUniqueId("127.0.0.1:0");
  std::barrier<> sync(kRanks);
  std::uint64_t before = 0, after = 0;
  std::vector<std::string> errors(kRanks);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kRanks; ++r)
    ranks.emplace_back([&, r] {
      try {
        tether::TcpOptions o;
        o.timeout = std::chrono::milliseconds(120000);
        tether::TcpBootstrap b(r, kRanks, id, o);
        std::vector<unsigned char> data(bytes * kRanks), in(kind == Kind::Alltoall ? bytes * kRanks : 0);
        auto check = [&](int call) {
          for (int p = 0; p < kRanks; ++p) {
            if ((kind == Kind::Ring || kind == Kind::NonblockingRing) && p != r && p != (r + kRanks - 1) % kRanks)
              continue;  // not sent here
            const auto* block = &data[static_cast<std::size_t>(p) * bytes];
            if (block[0] != static_cast<unsigned char>(p + call) || block[bytes - 1] != static_cast<unsigned char>(p))
              throw std::runtime_error("rank " + std::to_string(r) + ": wrong block from rank " + std::to_string(p));
          }
        };
        // Rank r's block (to every rank): first byte r + call, last byte r.
        auto call = [&](int i) {
          if (kind == Kind::Allgather) {
            data[static_cast<std::size_t>(r) * bytes] = static_cast<unsigned char>(r + i);
            data[static_cast<std::size_t>(r + 1) * bytes - 1] = static_cast<unsigned char>(r);
            b.allgather(data.data(), bytes);
            return;
          }
          if (kind == Kind::Ring) {  // block r goes to rank r + 1; block r - 1 comes from rank r - 1
            const int next = (r + 1) % kRanks, prev = (r + kRanks - 1) % kRanks;
            data[static_cast<std::size_t>(r) * bytes] = static_cast<unsigned char>(r + i);
            data[static_cast<std::size_t>(r + 1) * bytes - 1] = static_cast<unsigned char>(r);
            b.send(&data[static_cast<std::size_t>(r) * bytes], bytes, next, i % 3);
            b.recv(&data[static_cast<std::size_t>(prev) * bytes], bytes, prev, i % 3);
            return;
          }
          if (kind == Kind::NonblockingRing) {  // the ring's exchange as an irecv and an isend, then waits
            const int next = (r + 1) % kRanks, prev = (r + kRanks - 1) % kRanks;
            data[static_cast<std::size_t>(r) * bytes] = static_cast<unsigned char>(r + i);
            data[static_cast<std::size_t>(r + 1) * bytes - 1] = static_cast<unsigned char>(r);
            tether::Request received = b.irecv(&data[static_cast<std::size_t>(prev) * bytes], bytes, prev, i % 3);
            tether::Request sent = b.isend(&data[static_cast<std::size_t>(r) * bytes], bytes, next, i % 3);
            sent.wait();
            received.wait();
            return;
          }
          if (kind == Kind::Broadcast) {
            if (r == 0)
              for (int q = 0; q < kRanks; ++q) {
                data[static_cast<std::size_t>(q) * bytes] = static_cast<unsigned char>(q + i);
                data[static_cast<std::size_t>(q + 1) * bytes - 1] = static_cast<unsigned char>(q);
              }
            b.broadcast(data.data(), bytes * kRanks, 0);
            b.barrier();  // the root runs at most one call ahead (the stash stays bounded)
            return;
          }
          for (int q = 0; q < kRanks; ++q) {
            in[static_cast<std::size_t>(q) * bytes] = static_cast<unsigned char>(r + i);
            in[static_cast<std::size_t>(q + 1) * bytes - 1] = static_cast<unsigned char>(r);
          }
          b.alltoall(in.data(), data.data(), bytes);
        };
        for (int i = 0; i < kWarmup; ++i) call(i);
        check(kWarmup - 1);
        sync.arrive_and_wait();
        if (r == 0) before = allocations.load();
        sync.arrive_and_wait();
        for (int i = 0; i < counted; ++i) call(i);
        sync.arrive_and_wait();
        if (r == 0) after = allocations.load();
        sync.arrive_and_wait();
        check(counted - 1);
        b.barrier();
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
        sync.arrive_and_drop();
      }
    });
  for (auto& t : ranks) t.join();
  for (const auto& e : errors) REQUIRE(e.empty());
  const double perRankPerCall = static_cast<double>(after - before) / (kRanks * counted);
  std::printf("heap allocations per rank per %zu B %s at %d ranks: %.2f (%llu over %d calls)\n", bytes,
              kind == Kind::Allgather   ? "all-gather"
              : kind == Kind::Alltoall  ? "all-to-all"
              : kind == Kind::Broadcast ? "broadcast"
              : kind == Kind::Ring      ? "send and receive"
                                        : "isend and irecv",
              kRanks, perRankPerCall, static_cast<unsigned long long>(after - before), counted);
  return perRankPerCall;
}

}  // namespace

TEST_CASE("a steady-state 64-byte all-gather at 8 ranks allocates at most once per rank and call",
          "[multiproc][allocations]") {
  CHECK(allocationsPerRankPerCall(64, 2000) <= kMostPerRankPerCall);
}

// Blocks of 8 KiB: every frame (a block, or the 64 KiB result) is larger than
// the 4 KiB copy buffers and no larger than eagerBytes (a send not waited for).
TEST_CASE("a steady-state all-gather of 8 KiB blocks (64 KiB results) at 8 ranks allocates nothing per frame",
          "[multiproc][allocations]") {
  CHECK(allocationsPerRankPerCall(8192, 500) <= kMostPerRankPerCall);
}

// The uniform all-to-all's plan is cached like the all-gather's (its blocks
// follow from the size; no count and displacement arrays per call).
TEST_CASE("a steady-state 64-byte all-to-all at 8 ranks allocates nothing per call", "[multiproc][allocations]") {
  CHECK(allocationsPerRankPerCall(64, 2000, Kind::Alltoall) <= kMostPerRankPerCall);
}

// A broadcast's frames usually arrive before the receivers have posted their
// receives: stashed, in buffers that earlier stashed payloads emptied. (A
// root broadcasting in a loop with nothing to hold it runs ahead of its
// receivers by a varying number of calls, and their stashes grow to the
// largest lead seen: not a steady state, so each call here ends in a barrier.)
TEST_CASE("a steady-state broadcast of 512 bytes and a barrier at 8 ranks allocate nothing per call",
          "[multiproc][allocations]") {
  CHECK(allocationsPerRankPerCall(64, 2000, Kind::Broadcast) <= kMostPerRankPerCall);
}

// A blocking send and receive run without a coroutine, their op and
// completion reused call after call (OpRun, ReusedCall), as a
// collective's are. Three tags in turn: each is a key of its own.
TEST_CASE("a steady-state blocking send and receive of 2 KiB around a ring of 8 ranks allocate nothing per call",
          "[multiproc][allocations]") {
  CHECK(allocationsPerRankPerCall(2048, 2000, Kind::Ring) <= kMostPerRankPerCall);
}

TEST_CASE("a steady-state isend and irecv of 2 KiB around a ring of 8 ranks allocate nothing per call",
          "[multiproc][allocations]") {
  CHECK(allocationsPerRankPerCall(2048, 2000, Kind::NonblockingRing) <= kMostPerRankPerCall);
}
