// The adapter behaves as MSCCL++'s own TcpBootstrap at its boundary: MSCCL++'s
// test/mp_unit/bootstrap_tests.cc checks (all-gather, barrier, send/recv
// received in another order than sent, the IPC domain) over forked
// TcpBootstrap ranks, and MSCCL++'s documented semantics: any int tag, a
// receive larger than the message, errors as mscclpp::Error.
#include <catch2/catch.hpp>

#include <climits>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <mscclpp/core.hpp>
#include <tether/adapters/mscclpp.hpp>
#include <tether/tcp_bootstrap.hpp>
#include <tether/testing/in_process.hpp>

#include "multiproc.hpp"

using Adapter = tether::adapters::BootstrapFor<mscclpp::Bootstrap>;
using tether::test::expect;

namespace {

std::shared_ptr<tether::Bootstrap> borrow(tether::Bootstrap& rank) {
  return std::shared_ptr<tether::Bootstrap>(&rank, [](tether::Bootstrap*) {});
}

// MSCCL++'s checks of a bootstrap, through the base class (our own words).
void mscclppBootstrapChecks(mscclpp::Bootstrap& b) {
  const int rank = b.getRank(), n = b.getNranks();
  std::vector<int> all(static_cast<std::size_t>(n), 0);
  all[static_cast<std::size_t>(rank)] = rank + 1;
  b.allGather(all.data(), sizeof(int));
  for (int r = 0; r < n; ++r) expect(all[static_cast<std::size_t>(r)] == r + 1, "allGather slot " + std::to_string(r));
  b.barrier();
  // Three tags to every peer, received in another order than sent.
  for (int peer = 0; peer < n; ++peer) {
    if (peer == rank) continue;
    for (int tag = 0; tag < 3; ++tag) {
      int message = (rank + 1) * 3 + tag;
      b.send(&message, sizeof message, peer, tag);
    }
  }
  for (int peer = 0; peer < n; ++peer) {
    if (peer == rank) continue;
    for (int tag : {1, 2, 0}) {
      int message = 0;
      b.recv(&message, sizeof message, peer, tag);
      expect(message == (peer + 1) * 3 + tag,
             "message of tag " + std::to_string(tag) + " from " + std::to_string(peer));
    }
  }
  const int perDomain = b.getNranksPerIpcDomain();
  expect(perDomain > 0 && perDomain <= n, "getNranksPerIpcDomain " + std::to_string(perDomain));
}

// MSCCL++'s error code and the nested tether::Error's text, or "no error".
template <class Call>
std::string mscclppError(Call call) {
  try {
    call();
  } catch (const mscclpp::Error& e) {
    std::string nested = "no nested tether::Error";
    try {
      std::rethrow_if_nested(e);
    } catch (const tether::Error& t) {
      nested = std::string(tether::toString(t.code())) + " rank " + std::to_string(t.rank());
    }
    return std::to_string(static_cast<int>(e.getErrorCode())) + " [" + nested + "]: " + e.what();
  }
  return "no error";
}
std::string code(mscclpp::ErrorCode c) { return std::to_string(static_cast<int>(c)); }

// A runtime base that is not MSCCL++'s: the adapter throws tether::Error.
struct OtherBase {
  virtual ~OtherBase() = default;
  virtual int getRank() const = 0;
  virtual int getNranks() const = 0;
  virtual int getNranksPerNode() const = 0;
  virtual void send(void* data, int size, int peer, int tag) = 0;
  virtual void recv(void* data, int size, int peer, int tag) = 0;
  virtual void allGather(void* allData, int size) = 0;
  virtual void barrier() = 0;
};

}  // namespace

TEST_CASE(
    "MSCCL++'s bootstrap checks (allGather, barrier, tags received out of order, IPC domain) pass on 4 forked ranks",
    "[mscclpp][mscclpp-adapter]") {
  auto results = tether::test::runRanks(4, [](int rank, const tether::UniqueId& id) {
    auto adapter = std::make_shared<Adapter>(std::make_shared<tether::TcpBootstrap>(rank, 4, id));
    mscclppBootstrapChecks(*adapter);
    expect(adapter->getNranksPerIpcDomain() == 4, "one host, one IPC domain");
  });
  INFO(tether::test::summary(results));
  CHECK(tether::test::allOk(results));
}

TEST_CASE("every int is a tag of its own, negative ones and INT_MIN/INT_MAX included, as in MSCCL++",
          "[mscclpp][mscclpp-adapter]") {
  tether::testing::InProcessWorld world(2);
  const std::vector<int> tags = {INT_MIN, -2, -1, 0, 1, INT_MAX};
  world.run([&](tether::Bootstrap& rank) {
    Adapter adapter(borrow(rank));
    if (rank.rank() == 0) {
      for (std::size_t i = 0; i < tags.size(); ++i) {
        long value = 1000 + static_cast<long>(i);
        adapter.send(&value, sizeof value, 1, tags[i]);
      }
    } else {
      for (std::size_t i = tags.size(); i-- > 0;) {  // the other order: each tag is its own channel
        long value = 0;
        adapter.recv(&value, sizeof value, 0, tags[i]);
        expect(value == 1000 + static_cast<long>(i),
               "tag " + std::to_string(tags[i]) + " got " + std::to_string(value));
      }
    }
    adapter.barrier();
  });
}

TEST_CASE("a receive larger than the message fills what was sent; a smaller one is MSCCL++'s message truncated",
          "[mscclpp][mscclpp-adapter]") {
  tether::testing::InProcessWorld world(2);
  std::string truncated;
  world.run([&](tether::Bootstrap& rank) {
    Adapter adapter(borrow(rank));
    if (rank.rank() == 0) {
      char three[3] = {'a', 'b', 'c'}, eight[8] = {'1', '2', '3', '4', '5', '6', '7', '8'}, next[2] = {'o', 'k'};
      adapter.send(three, 3, 1, -7);
      adapter.send(nullptr, 0, 1, -7);
      adapter.send(eight, 8, 1, 5);
      adapter.send(next, 2, 1, 5);
    } else {
      char room[16];
      std::memset(room, '.', sizeof room);
      adapter.recv(room, sizeof room, 0, -7);
      expect(std::string(room, 5) == "abc..", "larger receive: " + std::string(room, 5));
      adapter.recv(room, sizeof room, 0, -7);  // an empty message
      char small[4] = {};
      truncated = mscclppError([&] { adapter.recv(small, sizeof small, 0, 5); });
      adapter.recv(small, sizeof small, 0, 5);  // the next message is still the next one
      expect(std::string(small, 2) == "ok", "after the truncated one: " + std::string(small, 2));
    }
    adapter.barrier();
  });
  CHECK(truncated == code(mscclpp::ErrorCode::InvalidUsage) +
                         " [InvalidArgument rank 1]: rank 1: recv from peer 0 tag 5: message truncated: received 8 "
                         "bytes, the buffer holds 4");
}

TEST_CASE("two threads sending on one (peer, tag) never interleave a message's size and payload",
          "[mscclpp][mscclpp-adapter]") {
  tether::testing::InProcessWorld world(2);
  constexpr int kEach = 1000;
  world.run([&](tether::Bootstrap& rank) {
    Adapter adapter(borrow(rank));
    if (rank.rank() == 0) {
      auto sender = [&](char fill, int size) {
        std::string text(static_cast<std::size_t>(size), fill);
        for (int i = 0; i < kEach; ++i) adapter.send(&text[0], size, 1, -1);
      };
      std::thread a(sender, 'a', 3), b(sender, 'b', 5);
      a.join();
      b.join();
    } else {
      int as = 0, bs = 0;
      for (int i = 0; i < 2 * kEach; ++i) {
        char room[8];
        std::memset(room, 0, sizeof room);
        adapter.recv(room, sizeof room, 0, -1);
        const std::string got(room);
        expect(got == "aaa" || got == "bbbbb", "message " + std::to_string(i) + " is '" + got + "'");
        ++(got == "aaa" ? as : bs);
      }
      expect(as == kEach && bs == kEach, "counts " + std::to_string(as) + " and " + std::to_string(bs));
    }
    adapter.barrier();
  });
}

TEST_CASE("failures arrive as mscclpp::Error with MSCCL++'s code and the tether::Error nested",
          "[mscclpp][mscclpp-adapter]") {
  tether::testing::InProcessWorld world(2);
  std::vector<std::string> timeouts(2), aborts(2);
  world.run([&](tether::Bootstrap& rank) {
    Adapter adapter(borrow(rank));
    const auto r = static_cast<std::size_t>(rank.rank());
    adapter.barrier();
    adapter.underlying().setTimeout(std::chrono::milliseconds(300));
    int value = 0;
    timeouts[r] = mscclppError([&] { adapter.recv(&value, sizeof value, 1 - rank.rank(), 3); });
    adapter.underlying().setTimeout(std::chrono::milliseconds(20000));
    // Rank 1 says it is past its timeout; rank 0 then aborts the world.
    if (rank.rank() == 1) {
      adapter.send(&value, sizeof value, 0, 4);
    } else {
      adapter.recv(&value, sizeof value, 1, 4);
      rank.abort("test abort");
    }
    aborts[r] = mscclppError([&] { adapter.barrier(); });
  });
  for (std::size_t r = 0; r < 2; ++r) {
    INFO("rank " << r << ": " << timeouts[r] << " / " << aborts[r]);
    CHECK(timeouts[r].rfind(code(mscclpp::ErrorCode::Timeout) + " [Timeout rank " + std::to_string(r) + "]: rank ",
                            0) == 0);
    CHECK(aborts[r].rfind(code(mscclpp::ErrorCode::Aborted) + " [Aborted rank ", 0) == 0);
    CHECK_THAT(aborts[r], Catch::Contains("test abort"));
  }
}

TEST_CASE("getNranksPerIpcDomain counts the ranks sharing the caller's domain key and refuses MSCCL++'s bad layouts",
          "[mscclpp][mscclpp-adapter]") {
  tether::testing::InProcessWorld world(4);  // one node: the default domain is all 4
  std::vector<int> byNode(4), byPair(4);
  std::vector<std::string> interleaved(4);
  world.run([&](tether::Bootstrap& rank) {
    const int r = rank.rank();
    byNode[static_cast<std::size_t>(r)] = Adapter(borrow(rank)).getNranksPerIpcDomain();
    Adapter pairs(borrow(rank), [r] { return static_cast<std::uint64_t>(r / 2); });  // fabrics {0,1} {2,3}
    byPair[static_cast<std::size_t>(r)] = pairs.getNranksPerIpcDomain();
    CHECK(pairs.getNranksPerIpcDomain() == 2);                                       // cached: no second all-gather
    Adapter mixed(borrow(rank), [r] { return static_cast<std::uint64_t>(r % 2); });  // {0,2} {1,3}
    interleaved[static_cast<std::size_t>(r)] = mscclppError([&] { mixed.getNranksPerIpcDomain(); });
  });
  for (int r = 0; r < 4; ++r) {
    CHECK(byNode[static_cast<std::size_t>(r)] == 4);
    CHECK(byPair[static_cast<std::size_t>(r)] == 2);
    CHECK(interleaved[static_cast<std::size_t>(r)] ==
          code(mscclpp::ErrorCode::InvalidUsage) + " [InvalidArgument rank " + std::to_string(r) + "]: rank " +
              std::to_string(r) +
              ": getNranksPerIpcDomain: IPC domain ranks must have the same size and be consecutive ranks: rank 1 "
              "is not in the domain of rank 0");
  }
}

TEST_CASE("over a base that is not MSCCL++'s the adapter throws the tether::Error itself",
          "[mscclpp][mscclpp-adapter]") {
  tether::testing::InProcessWorld world(2);
  std::vector<std::string> errors(2);
  world.run([&](tether::Bootstrap& rank) {
    tether::adapters::BootstrapFor<OtherBase> adapter(borrow(rank));
    int value = 0;
    try {
      adapter.send(&value, -1, 1 - rank.rank(), -3);
    } catch (const tether::Error& e) {
      errors[static_cast<std::size_t>(rank.rank())] = std::string(tether::toString(e.code())) + ": " + e.what();
    }
    adapter.barrier();
  });
  CHECK(errors[0] == "InvalidArgument: rank 0: send: negative size -1");
  CHECK(errors[1] == "InvalidArgument: rank 1: send: negative size -1");
}
