// The same scenarios, asserted inside the rank bodies, run over InProcessWorld
// (threads) and over TcpBootstrap (forked ranks): the testing API must keep the
// contract of the real implementation — contents, matching, error codes.
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <tether/tcp_bootstrap.hpp>
#include <tether/testing/in_process.hpp>

#include "multiproc.hpp"
#include "testing_api_support.hpp"

using tether::Bootstrap;
using tether::ErrorCode;
using tether::testing::InProcessWorld;
using testing_api::check;
using testing_api::contains;
using testing_api::errorFrom;
using std::chrono::milliseconds;

namespace {

struct Scenario {
  const char* name;
  int nranks;
  std::function<void(Bootstrap&)> body;  // throws when the rank sees something unexpected
};

void expectCode(const tether::Error& e, ErrorCode code, const std::string& what) {
  check(e.code() == code, what + ": unexpected error code, message: " + e.what());
}

// Ranks wait here for each other with point-to-point only (works on a
// communicator whose collectives have failed).
void p2pRendezvous(Bootstrap& b, int tag) {
  int token = b.rank();
  if (b.rank() != 0) {
    b.send(&token, sizeof token, 0, tag);
    b.recv(&token, sizeof token, 0, tag);
    return;
  }
  for (int p = 1; p < b.size(); ++p) b.recv(&token, sizeof token, p, tag);
  for (int p = 1; p < b.size(); ++p) b.send(&token, sizeof token, p, tag);
}

// Every rank learns whether any rank saw `flag` (point-to-point only).
bool anyRank(Bootstrap& b, bool flag, int tag) {
  int value = flag ? 1 : 0;
  if (b.rank() != 0) {
    b.send(&value, sizeof value, 0, tag);
    b.recv(&value, sizeof value, 0, tag);
    return value != 0;
  }
  for (int p = 1; p < b.size(); ++p) {
    int theirs = 0;
    b.recv(&theirs, sizeof theirs, p, tag);
    value |= theirs;
  }
  for (int p = 1; p < b.size(); ++p) b.send(&value, sizeof value, p, tag);
  return value != 0;
}

// A mismatch must surface as Protocol on at least one rank. Over TCP the rank
// that notices first withdraws its unsent frames, so its peer may only see its
// deadline pass (Timeout); the in-process world always delivers, so there both
// ranks may notice.
void expectMismatchNoticed(Bootstrap& b, const std::function<void()>& call, bool mayReturn, int tag) {
  b.setTimeout(milliseconds(1000));
  bool sawProtocol = false;
  try {
    call();
    check(mayReturn, "the collective returned on a rank that must notice or time out");
  } catch (const tether::Error& e) {
    check(e.code() == ErrorCode::Protocol || e.code() == ErrorCode::Timeout,
          std::string("mismatch: unexpected error ") + e.what());
    sawProtocol = e.code() == ErrorCode::Protocol;
    if (sawProtocol) check(e.rank() == b.rank() && e.peer() == 1 - b.rank(), "rank and peer set");
  }
  b.setTimeout(milliseconds(5000));
  check(anyRank(b, sawProtocol, tag), "no rank reported Protocol for the mismatch");
}

std::vector<Scenario> scenarios() {
  std::vector<Scenario> list;
  list.push_back({"collective and point-to-point contents", 3, [](Bootstrap& b) {
    const int n = b.size(), me = b.rank();
    std::vector<int> all(n, -1);
    all[me] = me + 10;
    b.allgather(all.data(), sizeof(int));
    for (int r = 0; r < n; ++r) check(all[r] == r + 10, "allgather content");
    std::vector<int> out(n), in(n, -1);
    for (int r = 0; r < n; ++r) out[r] = me * 100 + r;
    b.alltoall(out.data(), in.data(), sizeof(int));
    for (int r = 0; r < n; ++r) check(in[r] == r * 100 + me, "alltoall content");
    int value = me == 2 ? 77 : 0;
    b.broadcast(&value, sizeof value, 2);
    check(value == 77, "broadcast content");
    b.barrier();
    if (me == 0) {
      for (int tag : {5, 6}) b.send(&tag, sizeof tag, 1, tag);
    } else if (me == 1) {
      int got = 0;
      b.recv(&got, sizeof got, 0, 6);
      check(got == 6, "tag 6 first");
      b.recv(&got, sizeof got, 0, 5);
      check(got == 5, "tag 5 second");
    }
    b.barrier();
  }});
  list.push_back({"split by (key, parent rank), kNoColor gives nullptr", 4, [](Bootstrap& b) {
    auto child = b.split(b.rank() == 3 ? Bootstrap::kNoColor : 0, b.rank() == 0 ? 9 : 1);
    if (b.rank() == 3) {
      check(child == nullptr, "kNoColor -> nullptr");
    } else {
      check(child && child->size() == 3, "child size");
      const int expected[] = {2, 0, 1};  // key 9 sorts last; equal keys by parent rank
      check(child->rank() == expected[b.rank()], "child rank");
      std::vector<int> all(3, -1);
      all[child->rank()] = b.rank();
      child->allgather(all.data(), sizeof(int));
      check(all == std::vector<int>({1, 2, 0}), "child allgather");
    }
    b.barrier();
  }});
  list.push_back({"subset barrier does not consume a collective id", 3, [](Bootstrap& b) {
    if (b.rank() != 1) b.barrier({2, 0});
    int all[3] = {0, 0, 0};
    all[b.rank()] = b.rank() + 1;
    b.allgather(all, sizeof(int));
    check(all[0] == 1 && all[1] == 2 && all[2] == 3, "allgather after subset barrier");
  }});
  list.push_back({"different collectives at one id: Protocol on a rank that notices", 2, [](Bootstrap& b) {
    std::vector<unsigned char> buffer(64);
    expectMismatchNoticed(b, [&] {
      if (b.rank() == 0) b.broadcast(buffer.data(), 64, 0);
      else b.allgather(buffer.data(), 32);
    }, /*mayReturn=*/b.rank() == 0, 40);
  }});
  list.push_back({"one collective with different sizes: Protocol on a rank that notices", 2, [](Bootstrap& b) {
    std::vector<unsigned char> buffer(64);
    expectMismatchNoticed(b, [&] { b.allgather(buffer.data(), b.rank() == 0 ? 32 : 16); },
                          /*mayReturn=*/false, 41);
  }});
  list.push_back({"send/recv size mismatch: Protocol", 2, [](Bootstrap& b) {
    b.setTimeout(milliseconds(5000));
    std::uint64_t word = 1;
    if (b.rank() == 0) {
      b.send(&word, sizeof word, 1, 3);
    } else {
      unsigned char big[16];
      auto e = errorFrom([&] { b.recv(big, sizeof big, 0, 3); });
      expectCode(e, ErrorCode::Protocol, "p2p size mismatch");
      check(contains(e.what(), "8") && contains(e.what(), "16"), std::string("names both sizes: ") + e.what());
    }
    p2pRendezvous(b, 42);
  }});
  list.push_back({"a rank that never calls: Timeout on the others", 3, [](Bootstrap& b) {
    if (b.rank() != 2) {
      b.setTimeout(milliseconds(200));
      int all[3] = {};
      auto e = errorFrom([&] { b.allgather(all, sizeof(int)); });
      expectCode(e, ErrorCode::Timeout, "allgather without rank 2");
      check(contains(e.what(), "rank " + std::to_string(b.rank())) && contains(e.what(), "allgather"),
            std::string("names rank and op: ") + e.what());
      b.setTimeout(milliseconds(5000));
    }
    p2pRendezvous(b, 43);  // rank 2 stays until the others have timed out
  }});
  list.push_back({"abort reaches the other rank; later calls fail too", 2, [](Bootstrap& b) {
    b.setTimeout(milliseconds(5000));
    int value = 0;
    if (b.rank() == 0) {
      std::this_thread::sleep_for(milliseconds(50));
      b.abort("stop now");
      expectCode(errorFrom([&] { b.barrier(); }), ErrorCode::Aborted, "call after own abort");
    } else {
      auto e = errorFrom([&] { b.recv(&value, sizeof value, 0, 0); });
      expectCode(e, ErrorCode::Aborted, "recv while rank 0 aborts");
      check(contains(e.what(), "stop now") && e.peer() == 0, std::string("names reason and peer: ") + e.what());
      expectCode(errorFrom([&] { b.send(&value, sizeof value, 0, 0); }), ErrorCode::Aborted, "later send");
    }
  }});
  list.push_back({"invalid arguments: InvalidArgument, no collective id consumed", 2, [](Bootstrap& b) {
    int value = 0;
    auto invalid = [](const tether::Error& e, const std::string& what) { expectCode(e, ErrorCode::InvalidArgument, what); };
    invalid(errorFrom([&] { b.send(&value, sizeof value, 2, 0); }), "peer out of range");
    invalid(errorFrom([&] { b.recv(&value, sizeof value, -1, 0); }), "negative peer");
    invalid(errorFrom([&] { b.send(&value, sizeof value, 0, -1); }), "negative tag");
    invalid(errorFrom([&] { b.recv(nullptr, 4, 0, 0); }), "null buffer");
    invalid(errorFrom([&] { b.allgather(nullptr, 4); }), "null allgather buffer");
    invalid(errorFrom([&] { b.broadcast(&value, sizeof value, 2); }), "root out of range");
    invalid(errorFrom([&] { b.barrier({1 - b.rank()}); }), "subset without caller");
    invalid(errorFrom([&] { b.barrier({0, 1, 1}); }), "duplicate in subset");
    invalid(errorFrom([&] { b.split(-7, 0); }), "negative color");
    int all[2] = {0, 0};
    all[b.rank()] = 5 + b.rank();
    b.allgather(all, sizeof(int));
    check(all[0] == 5 && all[1] == 6, "allgather after rejected calls");
  }});
  return list;
}

}  // namespace

TEST_CASE("scenarios hold over InProcessWorld", "[testing-api][conformance]") {
  for (const auto& scenario : scenarios()) {
    SECTION(scenario.name) {
      InProcessWorld world(scenario.nranks);
      REQUIRE_NOTHROW(world.run(scenario.body));
    }
  }
}

TEST_CASE("the same scenarios hold over TcpBootstrap", "[testing-api][conformance]") {
  for (const auto& scenario : scenarios()) {
    SECTION(scenario.name) {
      auto results = tether::test::runRanks(scenario.nranks, [&](int rank, const tether::UniqueId& id) {
        tether::TcpOptions options;
        options.timeout = milliseconds(10000);
        tether::TcpBootstrap bootstrap(rank, scenario.nranks, id, options);
        scenario.body(bootstrap);
      }, std::chrono::seconds(30));
      INFO(tether::test::summary(results));
      REQUIRE(tether::test::allOk(results));
    }
  }
}
