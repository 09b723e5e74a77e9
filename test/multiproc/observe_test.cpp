// What a bootstrap records about itself: its bring-up phases (InitTimings)
// and its counters (Counters), on forked local ranks. Expected counts are
// derived from what the calls must do (the plan an all-gather replays), not
// observed ones.
#include <catch2/catch.hpp>

#include <cstdint>
#include <thread>
#include <vector>

#include "coll/select.hpp"
#include "multiproc.hpp"
#include "rendezvous_sections.hpp"
#include "tether/detail/coll/front.hpp"

using namespace tether;
using test::expect;

namespace {

namespace dc = detail::coll;

TcpOptions opts() {
  TcpOptions o;
  o.timeout = std::chrono::milliseconds(60000);
  return o;
}

void runAll(int n, const std::function<void(TcpBootstrap&)>& body, const TcpOptions& o = opts()) {
  auto res = test::runRanks(
      n,
      [&](int rank, const UniqueId& id) {
        TcpBootstrap b(rank, n, id, o);
        body(b);
      },
      std::chrono::seconds(120));
  INFO(test::summary(res));
  REQUIRE(test::allOk(res));
}

// Frames and payload bytes one all-gather of `bytesPerRank` sends to (and
// receives from) other ranks on this rank: the Send (Recv) steps of the plan
// the library chooses for it, one frame each (all far below the payload limit).
struct PlanTraffic {
  std::uint64_t framesSent = 0, bytesSent = 0, framesReceived = 0, bytesReceived = 0;
};

PlanTraffic allgatherTraffic(int rank, int size, std::size_t bytesPerRank) {
  std::vector<unsigned char> buf(size * bytesPerRank);
  const dc::Prepared call = dc::allgatherCall(rank, size, "allgather", buf.data(), bytesPerRank);
  // As the world decides it: all ranks here are on this host.
  const bool cpuBound = static_cast<unsigned>(size) > std::thread::hardware_concurrency();
  dc::Choice choice;  // as a communicator chooses
  const dc::Algorithm& algo = choice.of(coll::settings, rank, size, cpuBound, call.call);
  dc::Plan plan = dc::record(algo, choice.shape, call.call);
  PlanTraffic t;
  for (const dc::Step& s : plan.steps()) {
    if (s.peer == rank) continue;
    if (s.kind == dc::Step::Kind::Send) ++t.framesSent, t.bytesSent += s.bytes;
    if (s.kind == dc::Step::Kind::Recv) ++t.framesReceived, t.bytesReceived += s.bytes;
  }
  return t;
}

bool before(const std::optional<std::chrono::microseconds>& a, const std::optional<std::chrono::microseconds>& b) {
  return !a || !b || *a <= *b;
}

}  // namespace

TEST_CASE("ten all-gathers on four ranks count ten calls and the frames their plan sends and receives",
          "[multiproc][observe]") {
  constexpr int kRanks = 4;
  constexpr std::size_t kBytes = 24;
  runAll(kRanks, [&](TcpBootstrap& b) {
    // On a child of its own, so that no later call's frames (the world's
    // closing barrier) can be counted before the counters are read.
    auto child = std::static_pointer_cast<TcpBootstrap>(b.split(0, b.rank()));
    std::vector<unsigned char> buf(kRanks * kBytes, static_cast<unsigned char>(b.rank()));
    for (int i = 0; i < 10; ++i) child->allgather(buf.data(), kBytes);
    const Counters c = child->counters();
    const PlanTraffic one = allgatherTraffic(b.rank(), kRanks, kBytes);
    expect(c.allgather == 10, "allgather calls = " + std::to_string(c.allgather));
    expect(c.alltoall + c.broadcast + c.barrier + c.split + c.send + c.recv == 0, "no other calls on the child");
    expect(one.framesSent > 0 && one.framesReceived > 0, "the plan sends and receives on 4 ranks");
    expect(c.framesSent == 10 * one.framesSent,
           "frames sent " + std::to_string(c.framesSent) + ", the plan's " + std::to_string(10 * one.framesSent));
    expect(c.framesReceived == 10 * one.framesReceived, "frames received " + std::to_string(c.framesReceived) +
                                                            ", the plan's " + std::to_string(10 * one.framesReceived));
    expect(c.bytesSent == 10 * one.bytesSent && c.bytesReceived == 10 * one.bytesReceived,
           "bytes sent " + std::to_string(c.bytesSent) + " and received " + std::to_string(c.bytesReceived) +
               ", the plan's " + std::to_string(10 * one.bytesSent) + " and " + std::to_string(10 * one.bytesReceived));
    expect(c.timeouts == 0 && c.aborts == 0, "no call failed");
    const Counters w = b.counters();
    expect(w.split == 1 && w.allgather == 0, "the split is the parent's call, the all-gathers are not");
    b.barrier();
  });
}

TEST_CASE("every frame sent is received: the ranks' sent and received counts and bytes add up after a mix of calls",
          "[multiproc][observe]") {
  constexpr int kRanks = 5;
  runAll(kRanks, [&](TcpBootstrap& b) {
    auto child = std::static_pointer_cast<TcpBootstrap>(b.split(0, b.rank()));
    const int n = child->size(), r = child->rank();
    std::vector<unsigned char> buf(n * 1000, 1), out(n * 1000);
    child->allgather(buf.data(), 1000);
    child->alltoall(buf.data(), out.data(), 1000);
    child->broadcast(buf.data(), 3000, 2);
    child->barrier();
    child->send(buf.data(), 77, (r + 1) % n, 5);
    child->recv(out.data(), 77, (r + n - 1) % n, 5);
    child->barrier({0, 1, 2, 3, 4});
    const Counters c = child->counters();
    expect(c.allgather == 1 && c.alltoall == 1 && c.broadcast == 1 && c.barrier == 1 && c.subsetBarrier == 1 &&
               c.send == 1 && c.recv == 1,
           "one call of each kind");
    std::vector<std::uint64_t> all(4 * n);
    const std::uint64_t mine[4] = {c.framesSent, c.bytesSent, c.framesReceived, c.bytesReceived};
    std::copy(mine, mine + 4, all.begin() + 4 * r);
    b.allgather(all.data(), 4 * sizeof(std::uint64_t));  // on the parent: not counted on the child
    std::uint64_t sum[4] = {};
    for (int i = 0; i < n; ++i)
      for (int k = 0; k < 4; ++k) sum[k] += all[4 * i + k];
    expect(sum[0] == sum[2], "frames sent " + std::to_string(sum[0]) + " = received " + std::to_string(sum[2]));
    expect(sum[1] == sum[3], "bytes sent " + std::to_string(sum[1]) + " = received " + std::to_string(sum[3]));
    // The send of 77 bytes crossed a link on every rank; so did the blocks.
    expect(sum[1] >= static_cast<std::uint64_t>(n) * 77 + static_cast<std::uint64_t>(n) * (n - 1) * 2000,
           "bytes: at least the messages, the all-gather's and the all-to-all's blocks");
    b.barrier();
  });
}

TEST_CASE("init timings are stamped in order, with a host-local meeting only under host-local aggregation",
          "[multiproc][observe]") {
  test::RendezvousSection rendezvous;
  const bool rootStar = rendezvous.rootStar();
  runAll(4, [&](TcpBootstrap& b) {
    const InitTimings t = b.initTimings();
    const auto now = std::chrono::system_clock::now();
    expect(t.started <= now && t.started > now - std::chrono::minutes(2), "the start is a wall-clock time of now");
    expect(t.listen && t.tableReceived && t.total, "listen, table and total are stamped on every rank");
    // Rank 0 registers itself and only counts in its group: without
    // TETHER_LOCAL_NRANKS a leader sends its group after a quiet spell, and
    // the root can have every rank (the table out, the group closed) before
    // it met its own group; then it has no host-local stamp (1 run in ~50).
    expect(rootStar ? !t.hostLocal : (bool(t.hostLocal) || b.rank() == 0),
           "a host-local meeting only under host-local aggregation, on every rank but the root");
    if (rootStar || b.rank() == 0) expect(bool(t.registered), "the rank registered with the root itself");
    expect(before(t.listen, t.registered) && before(t.listen, t.hostLocal), "listen comes first");
    // The root makes the table once every rank registered; when another rank
    // leads its host group, its own welcome there may come after the table.
    expect(before(t.registered, t.tableReceived) && (b.rank() == 0 || before(t.hostLocal, t.tableReceived)),
           "then the table");
    expect(before(t.tableReceived, t.total), "the constructor returns after the table");
    expect(before(t.tableReceived, t.firstLink), "a first link, if any yet, after the table");
    // Ranks 1 and 2 had no link to each other: this exchange opens one (a
    // small send returns before its link is up; the answer comes over it).
    std::uint64_t x = 7;
    if (b.rank() == 1) b.send(&x, sizeof x, 2, 0), b.recv(&x, sizeof x, 2, 0);
    if (b.rank() == 2) b.recv(&x, sizeof x, 1, 0), b.send(&x, sizeof x, 1, 0);
    if (b.rank() == 1 || b.rank() == 2) {
      const InitTimings after = b.initTimings();
      // Rank 1 dials after its table came; rank 2 may accept that dial before
      // its own table arrived (a link opened while joining is not a first link).
      if (b.rank() == 1 || after.firstLink)
        expect(after.firstLink && *after.firstLink >= *after.tableReceived, "the first link is stamped after the table");
      expect(after.listen == t.listen && after.total == t.total, "earlier phases are stamped once");
      const Counters c = b.counters();
      expect(c.redials == 0 && c.budgetCloses == 0, "no re-dials within the budget: redials " +
                                                        std::to_string(c.redials) + ", budget closes " +
                                                        std::to_string(c.budgetCloses));
    }
    // Which of ranks 1 and 2 dials is a race (rank 2's receive dials rank 1
    // unless rank 1's dial came first; 1 run in 30-40 it had): one of them did.
    std::vector<std::uint64_t> dials(4);
    if (b.rank() == 1 || b.rank() == 2) dials[b.rank()] = b.counters().dials;
    b.allgather(dials.data(), sizeof(std::uint64_t));
    expect(dials[1] + dials[2] >= 1, "ranks 1 and 2 counted their dials");
    b.barrier();
  });
}

TEST_CASE("a link budget of one closes the link to the root for a new peer, and the way back is a re-dial",
          "[multiproc][observe]") {
  ::setenv("TETHER_RENDEZVOUS", "root", 1);  // every rank starts with its link to the root, and no other
  TcpOptions o = opts();
  o.maxLinks = 1;
  runAll(
      3,
      [&](TcpBootstrap& b) {
        std::uint64_t x = 1;
        // Rank 1 talks to 2 (a second link: past the budget, so the idle
        // link to the root closes, on whichever side the new one opened),
        // then to the root again (a connection between two ranks that had
        // one: whoever dials it re-dials).
        if (b.rank() == 1)
          for (int peer : {2, 0}) {
            b.send(&x, sizeof x, peer, 1);
            b.recv(&x, sizeof x, peer, 2);
          }
        if (b.rank() != 1) {
          b.recv(&x, sizeof x, 1, 1);
          b.send(&x, sizeof x, 1, 2);
        }
        const Counters c = b.counters();
        std::vector<std::uint64_t> all(2 * b.size());
        all[2 * b.rank()] = c.budgetCloses;
        all[2 * b.rank() + 1] = c.redials;
        b.allgather(all.data(), 2 * sizeof(std::uint64_t));
        expect(all[2] >= 1, "rank 1 closed a link for the budget: " + std::to_string(all[2]));
        expect(all[1] + all[3] >= 1, "ranks 0 and 1 connected again: a re-dial on one of them");
        if (b.rank() != 0) expect(c.dials >= 1, "rank " + std::to_string(b.rank()) + " dialled the root at least");
        b.barrier();
      },
      o);
  ::unsetenv("TETHER_RENDEZVOUS");
}

TEST_CASE("a receive that times out and calls after an abort are counted as a timeout and as aborts",
          "[multiproc][observe]") {
  runAll(2, [&](TcpBootstrap& b) {
    std::uint64_t x = 0;
    if (b.rank() == 0) {
      b.setTimeout(std::chrono::milliseconds(300));
      try {
        b.recv(&x, sizeof x, 1, 9);  // rank 1 never sends on tag 9
      } catch (const Error& e) {
        expect(e.code() == ErrorCode::Timeout, std::string("timed out: ") + e.what());
      }
      Counters c = b.counters();
      expect(c.recv == 1 && c.timeouts == 1 && c.aborts == 0, "one receive, one timeout");
      b.abort("observe test");
      try {
        b.barrier();
      } catch (const Error& e) {
        expect(e.code() == ErrorCode::Aborted, std::string("aborted: ") + e.what());
      }
      c = b.counters();
      expect(c.barrier == 1 && c.aborts == 1 && c.timeouts == 1, "the barrier after the abort counts as an abort");
      return;
    }
    try {
      b.recv(&x, sizeof x, 0, 1);  // ended by rank 0's abort
    } catch (const Error& e) {
      expect(e.code() == ErrorCode::Aborted, std::string("aborted: ") + e.what());
    }
    const Counters c = b.counters();
    expect(c.recv == 1 && c.aborts == 1 && c.timeouts == 0, "the receive ended by the peer's abort");
  });
}
