// tether::adapters::BootstrapFor<mscclpp::Bootstrap> over InProcessWorld and
// over TcpBootstrap on forked ranks; built as C++17, as MSCCL++ users build,
// against stand-ins of <mscclpp/core.hpp> and <mscclpp/errors.hpp>
// (test/mscclpp/standin/). MSCCL++'s semantics: mscclpp_semantics_test.cpp.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>
#include <vector>

#include <mscclpp/core.hpp>
#include <tether/testing/in_process.hpp>

#include "mscclpp_snippet.hpp"  // docs/integration.md, verbatim
#include "multiproc.hpp"

using Adapter = tether::adapters::BootstrapFor<mscclpp::Bootstrap>;

namespace {

// What MSCCL++ does with a bootstrap while it sets up connections, through the
// base class only. Throws on a wrong value.
void exercise(mscclpp::Bootstrap& b, int expectPerNode) {
  const int rank = b.getRank(), n = b.getNranks();
  tether::test::expect(n >= 2, "at least two ranks");
  tether::test::expect(b.getNranksPerNode() == expectPerNode,
                       "getNranksPerNode " + std::to_string(b.getNranksPerNode()));
  // Collective, as MSCCL++'s: the domain is the node unless the caller says otherwise.
  tether::test::expect(b.getNranksPerIpcDomain() == expectPerNode,
                       "getNranksPerIpcDomain " + std::to_string(b.getNranksPerIpcDomain()));

  std::vector<long> all(static_cast<std::size_t>(n), -1);
  all[static_cast<std::size_t>(rank)] = 31L * rank + 1;
  b.allGather(all.data(), sizeof(long));
  for (int r = 0; r < n; ++r)
    tether::test::expect(all[static_cast<std::size_t>(r)] == 31L * r + 1, "allGather block " + std::to_string(r));

  // QP-like records on a ring, two tags, FIFO per (peer, tag).
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  for (int k = 0; k < 4; ++k) {
    int out[2] = {rank, k}, in[2] = {-1, -1};
    b.send(out, sizeof out, next, k % 2);
    b.recv(in, sizeof in, prev, k % 2);
    tether::test::expect(in[0] == prev && in[1] == k, "ring record " + std::to_string(k));
  }
  // The base's std::vector overloads stay usable through the adapter.
  std::vector<char> text(static_cast<std::size_t>(5 + rank), static_cast<char>('a' + rank)), got;
  b.send(text, next, 9);
  b.recv(got, prev, 9);
  tether::test::expect(got == std::vector<char>(static_cast<std::size_t>(5 + prev), static_cast<char>('a' + prev)),
                       "vector message from " + std::to_string(prev));
  b.barrier();
}

}  // namespace

TEST_CASE("BootstrapFor<mscclpp::Bootstrap> forwards every call to an InProcessWorld rank",
          "[mscclpp][mscclpp-adapter]") {
  tether::testing::InProcessWorld world(4, 2);
  world.run([](tether::Bootstrap& rank) {
    // The world owns its ranks; share them without taking ownership.
    Adapter adapter(std::shared_ptr<tether::Bootstrap>(&rank, [](tether::Bootstrap*) {}));
    mscclpp::Bootstrap& base = adapter;
    tether::test::expect(base.getRank() == rank.rank() && base.getNranks() == 4, "getRank/getNranks");
    exercise(base, 2);
  });
}

TEST_CASE("BootstrapFor<mscclpp::Bootstrap> forwards every call to a TcpBootstrap on forked ranks",
          "[mscclpp][mscclpp-adapter]") {
  auto results = tether::test::runRanks(4, [](int rank, const tether::UniqueId& id) {
    auto adapter = std::make_shared<Adapter>(std::make_shared<tether::TcpBootstrap>(rank, 4, id));
    tether::test::expect(adapter->getRank() == rank, "getRank");
    exercise(*adapter, 4);
  });
  INFO(tether::test::summary(results));
  CHECK(tether::test::allOk(results));
}

// The error a call throws as MSCCL++ callers see it (MSCCL++'s code, tether's
// message), or "no error".
template <class Call>
std::string errorOf(Call call) {
  try {
    call();
  } catch (const mscclpp::Error& e) {
    return std::to_string(static_cast<int>(e.getErrorCode())) + ": " + e.what();
  }
  return "no error";
}
const std::string kInvalidUsage = std::to_string(static_cast<int>(mscclpp::ErrorCode::InvalidUsage));

TEST_CASE("BootstrapFor rejects a null bootstrap and negative sizes with MSCCL++'s InvalidUsage naming rank and call",
          "[mscclpp][mscclpp-adapter]") {
  CHECK(errorOf([] { Adapter adapter(nullptr); }) == kInvalidUsage + ": BootstrapFor: the tether bootstrap is null");
  tether::testing::InProcessWorld world(2);
  std::vector<std::string> sendErrors(2), gatherErrors(2);
  world.run([&](tether::Bootstrap& rank) {
    Adapter adapter(std::shared_ptr<tether::Bootstrap>(&rank, [](tether::Bootstrap*) {}));
    int value = 0;
    auto r = static_cast<std::size_t>(rank.rank());
    sendErrors[r] = errorOf([&] { adapter.send(&value, -4, 1 - rank.rank(), 0); });
    gatherErrors[r] = errorOf([&] { adapter.allGather(&value, -1); });
    adapter.barrier();  // the rejected calls touched nothing
  });
  for (int r = 0; r < 2; ++r) {
    CHECK(sendErrors[r] == kInvalidUsage + ": rank " + std::to_string(r) + ": send: negative size -4");
    CHECK(gatherErrors[r] == kInvalidUsage + ": rank " + std::to_string(r) + ": allGather: negative size -1");
  }
}

TEST_CASE("the docs/integration.md MSCCL++ snippet builds a Communicator from the launch environment",
          "[mscclpp][mscclpp-adapter]") {
  auto results = tether::test::runRanks(3, [](int rank, const tether::UniqueId& id) {
    ::setenv("TETHER_UID", id.toString().c_str(), 1);
    ::setenv("TETHER_RANK", std::to_string(rank).c_str(), 1);
    ::setenv("TETHER_NRANKS", "3", 1);
    auto comm = makeCommunicator();
    exercise(*comm->bootstrap(), 3);
  });
  INFO(tether::test::summary(results));
  CHECK(tether::test::allOk(results));
}
