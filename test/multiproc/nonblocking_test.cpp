// Nonblocking calls on forked ranks (tether/request.hpp): several requests
// outstanding at once, test() driving progress, cancel of an unmatched
// receive and of a collective, argument checks before a collective id.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "multiproc.hpp"

using namespace tether;
using test::expect;

namespace {

TcpOptions opts() {
  TcpOptions o;
  o.timeout = std::chrono::milliseconds(30000);
  return o;
}

void run(int n, const std::function<void(TcpBootstrap&)>& body) {
  auto res = test::runRanks(n, [&](int rank, const UniqueId& id) {
    TcpBootstrap b(rank, n, id, opts());
    body(b);
  });
  INFO(test::summary(res));
  REQUIRE(test::allOk(res));
}

// The error `f` throws; fails the rank if it throws none.
template <class F>
Error errorOf(F&& f, const std::string& what) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  expect(false, what + " did not throw");
  throw;  // unreachable
}

bool contains(const Error& e, const std::string& part) { return std::string(e.what()).find(part) != std::string::npos; }

}  // namespace

TEST_CASE("nonblocking: ibarrier, iallgather and ialltoall while an irecv is pending", "[multiproc][nonblocking]") {
  run(4, [](TcpBootstrap& b) {
    const int n = b.size(), r = b.rank();
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    int got = -1;
    Request pending = b.irecv(&got, sizeof got, prev, 7);
    Request bar = b.ibarrier();
    std::vector<int> all(n, -1);
    all[r] = 100 + r;
    Request gather = b.iallgather(all.data(), sizeof(int));
    std::vector<int> out(n, -1), in(n);
    for (int i = 0; i < n; ++i) in[i] = r * 10 + i;
    Request a2a = b.ialltoall(in.data(), out.data(), sizeof(int));
    // A blocking collective while this thread's nonblocking ones are in
    // flight stays legal (docs/design.md, "Threads"): only a call made while
    // another thread's collective call is in progress is refused.
    b.barrier();
    // Waited for in the reverse order of starting: completion order is free.
    a2a.wait();
    gather.wait();
    bar.wait();
    for (int i = 0; i < n; ++i) {
      expect(all[i] == 100 + i, "allgather block " + std::to_string(i));
      expect(out[i] == i * 10 + r, "alltoall block " + std::to_string(i));
    }
    int mine = 1000 + r;
    Request s = b.isend(&mine, sizeof mine, next, 7);
    s.wait();
    pending.wait();
    expect(got == 1000 + prev, "irecv payload");
    expect(pending.test() && s.test(), "done requests stay done");
    b.barrier();  // the ids still agree after the nonblocking collectives
  });
}

TEST_CASE("nonblocking: test() alone completes an irecv and an in-place ialltoall", "[multiproc][nonblocking]") {
  run(3, [](TcpBootstrap& b) {
    const int n = b.size(), r = b.rank();
    std::vector<int> v(n);
    for (int i = 0; i < n; ++i) v[i] = r * 10 + i;
    Request a2a = b.ialltoall(v.data(), v.data(), sizeof(int));
    int got = -1;
    Request rr;
    if (r == 1) rr = b.irecv(&got, sizeof got, 0, 3);
    if (r == 0) {
      int x = 77;
      b.send(&x, sizeof x, 1, 3);
    }
    // Polls with a pause: test() never blocks, the deadline only turns a hang into a failure.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!(a2a.test() & rr.test())) {
      expect(std::chrono::steady_clock::now() < deadline, "requests done by test() before the deadline");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    for (int i = 0; i < n; ++i) expect(v[i] == i * 10 + r, "in-place alltoall block " + std::to_string(i));
    if (r == 1) expect(got == 77, "irecv payload via test()");
    b.barrier();
  });
}

TEST_CASE("nonblocking: cancel withdraws an unmatched irecv cleanly", "[multiproc][nonblocking]") {
  run(2, [](TcpBootstrap& b) {
    if (b.rank() == 1) {
      int lost = -1;
      Request r = b.irecv(&lost, sizeof lost, 0, 3);
      expect(r.cancel(), "cancel of an unmatched irecv");
      Error e = errorOf([&] { r.wait(); }, "wait after cancel");
      expect(e.code() == ErrorCode::Aborted, "cancelled irecv: Aborted");
      expect(contains(e, "rank 1") && contains(e, "recv from rank 0 tag 3") && contains(e, "cancelled"),
             std::string("message names rank, peer and operation: ") + e.what());
      expect(!r.cancel(), "a second cancel does nothing");
      {
        int dropped = -1;
        Request d = b.irecv(&dropped, sizeof dropped, 0, 3);  // destroyed unmatched: cancelled
      }
    }
    b.barrier();  // the communicator is still usable
    if (b.rank() == 0) {
      int x = 42;
      b.send(&x, sizeof x, 1, 3);
    } else {
      int got = -1;
      b.recv(&got, sizeof got, 0, 3);  // neither the cancelled nor the destroyed irecv took it
      expect(got == 42, "the next recv gets the message");
    }
    int y = 5;
    if (b.rank() == 0) {
      Request s = b.isend(&y, sizeof y, 1, 4);
      s.wait();
      expect(!s.cancel(), "cancel of a completed isend");
    } else {
      int got = 0;
      b.recv(&got, sizeof got, 0, 4);
      expect(got == 5, "isend payload");
    }
    b.barrier();
  });
}

TEST_CASE("nonblocking: cancelling a world collective poisons it and tells the peers", "[multiproc][nonblocking]") {
  run(2, [](TcpBootstrap& b) {
    if (b.rank() == 0) {
      std::vector<int> all(2, 0);
      Request g = b.iallgather(all.data(), sizeof(int));  // rank 1 never calls it
      expect(g.cancel(), "cancel of a running collective");
      Error e = errorOf([&] { g.wait(); }, "wait after cancel");
      expect(e.code() == ErrorCode::Aborted && contains(e, "allgather#1") && contains(e, "cancelled"),
             std::string("cancelled collective: ") + e.what());
      Error next = errorOf([&] { b.barrier(); }, "barrier after a cancelled collective");
      expect(contains(next, "cancelled"), std::string("later collective names the cancel: ") + next.what());
    } else {
      int never = 0;
      Error e = errorOf([&] { b.recv(&never, sizeof never, 0, 9); }, "recv on a peer of the cancel");
      expect(e.code() == ErrorCode::Aborted && contains(e, "rank 0"), std::string("peer told: ") + e.what());
    }
  });
}

TEST_CASE("nonblocking: invalid arguments throw before a collective id is taken", "[multiproc][nonblocking]") {
  run(3, [](TcpBootstrap& b) {
    const int n = b.size();
    std::vector<int> buf(2 * n);
    Error e = errorOf([&] { (void)b.ialltoall(buf.data(), buf.data() + 1, sizeof(int)); }, "overlapping ialltoall");
    expect(e.code() == ErrorCode::InvalidArgument, "overlap: InvalidArgument");
    Error p = errorOf([&] { (void)b.irecv(buf.data(), 4, n, 0); }, "irecv from a rank out of range");
    expect(p.code() == ErrorCode::InvalidArgument, "peer out of range: InvalidArgument");
    std::vector<int> all(n, -1);
    all[b.rank()] = b.rank();
    Request g = b.iallgather(all.data(), sizeof(int));
    g.wait(std::chrono::milliseconds(20000));
    for (int i = 0; i < n; ++i) expect(all[i] == i, "allgather after rejected calls");
    Error w = errorOf([&] { g.wait(std::chrono::milliseconds(-1)); }, "negative wait timeout");
    expect(w.code() == ErrorCode::InvalidArgument, "negative timeout: InvalidArgument");
  });
}
