// A rank that arrives at a root that is already shutting down: the root's
// rendezvous failed (another rank was lost) and it drains its links. The late
// rank's dial is refused (R7), and it learns why: the error names the root's
// cause, not only that the root shuts down. Ranks other than the late one are
// raw clients of this process (raw_member.hpp), so that the test decides
// when each arrives, is lost, or stays silent.
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "raw_client.hpp"
#include "raw_member.hpp"
#include "tether/error.hpp"
#include "tether/tcp_bootstrap.hpp"

using namespace tether;
using namespace std::chrono_literals;
using fault::RawClient;

namespace {

// Passes the root's handshake as `rank`: true once welcomed.
bool join(RawClient& c, const fault::Member& m, int rank) {
  c.send(fault::frameBytes(wire::Kind::Hello, fault::helloFor(fault::challenge(c), m, rank, m.secret)));
  auto f = c.readFrame(5s);
  return f && f->first.kind == wire::Kind::Welcome;
}

// A connection to the root once it listens (it starts in another thread).
std::unique_ptr<RawClient> dialRoot(std::uint16_t port) {
  for (int i = 0;; ++i) {
    try {
      return std::make_unique<RawClient>("127.0.0.1", port);
    } catch (const std::runtime_error&) {
      if (i == 100) throw;
      std::this_thread::sleep_for(50ms);
    }
  }
}

}  // namespace

TEST_CASE("a rank that dials a root shutting down after a failed rendezvous is told the root's cause",
          "[fault][peer-loss]") {
  const int n = 4;
  const UniqueId id = TcpBootstrap::createUniqueId("127.0.0.1:0");
  const fault::Member m = fault::memberOf(id, n);
  std::string rootError;
  std::thread root([&] {
    TcpOptions o;
    o.timeout = 4s;  // its drain after the failure: min(timeout, 5 s), held by a silent rank
    try {
      TcpBootstrap b(0, n, id, o);
    } catch (const Error& e) {
      rootError = e.what();
    }
  });
  struct Joined {
    std::thread& t;
    ~Joined() {
      if (t.joinable()) t.join();  // a failed REQUIRE leaves before the join below
    }
  } joined{root};
  // Rank 2 joins and then says nothing: the root's goodbye to it goes
  // unanswered, so the root drains (refusing new dials) for its whole drain.
  auto silent = dialRoot(id.rootPort());
  REQUIRE(join(*silent, m, 2));
  // Rank 1 joins and is lost: the root's rendezvous fails.
  {
    RawClient lost("127.0.0.1", id.rootPort());
    REQUIRE(join(lost, m, 1));
    std::this_thread::sleep_for(100ms);
    lost.reset();
  }
  std::this_thread::sleep_for(500ms);
  // Rank 3 arrives late, while the root drains.
  std::string lateError;
  ErrorCode lateCode = ErrorCode::System;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    TcpOptions o;
    o.timeout = 10s;
    TcpBootstrap b(3, n, id, o);
  } catch (const Error& e) {
    lateError = e.what();
    lateCode = e.code();
  }
  const auto took = std::chrono::steady_clock::now() - t0;
  root.join();
  INFO("root: " << rootError);
  INFO("late rank: " << lateError);
  REQUIRE(rootError.find("lost rank 1") != std::string::npos);
  CHECK(took < 3s);  // refused at once, not at its 10 s deadline
  CHECK(lateError.find("rank 3") != std::string::npos);
  CHECK(lateError.find("rank 0") != std::string::npos);
  CHECK(lateError.find("lost rank 1") != std::string::npos);
  // Refused (PeerLost: the root cannot be reached), or, if it dialled before the
  // root failed, told by the root's abort notice (Aborted): the cause either way.
  CHECK((lateCode == ErrorCode::PeerLost || lateCode == ErrorCode::Aborted));
}
