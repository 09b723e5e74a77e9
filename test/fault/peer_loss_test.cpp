// Peer loss and abort propagation with real processes: a rank SIGKILLs itself
// at a random point of a random collective; every survivor must fail with
// PeerLost naming it, or Aborted whose reason names it, well before its
// deadline. TETHER_FAULT_TRIALS=N runs N trials (long mode), TETHER_FAULT_SEED
// fixes the random choices.
#include <signal.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>

#include "fault_support.hpp"
#include "multiproc.hpp"
#include "rendezvous_sections.hpp"

using namespace tether;
using namespace std::chrono_literals;

namespace {

constexpr auto kCallTimeout = 20s;  // a survivor that needs this long has hung
constexpr auto kTrialDeadline = 40s;

enum class Coll { Allgather, Alltoall, Alltoallv, Broadcast, Barrier, Split, Count };
const char* collName(Coll c) {
  static const char* names[] = {"allgather", "alltoall", "alltoallv", "broadcast", "barrier", "split"};
  return names[static_cast<int>(c)];
}

void quietChild() {
  if (!std::getenv("TETHER_DEBUG")) setLogLevel(LogLevel::None);
}

void runOne(TcpBootstrap& b, Coll c, std::size_t bytes, int iteration) {
  int n = b.size();
  switch (c) {
    case Coll::Allgather: {
      std::vector<unsigned char> v(bytes * n, static_cast<unsigned char>(b.rank()));
      b.allgather(v.data(), bytes);
      for (int r = 0; r < n; ++r) test::expect(v[r * bytes] == static_cast<unsigned char>(r), "allgather content");
      break;
    }
    case Coll::Alltoall: {
      std::vector<unsigned char> s(bytes * n, static_cast<unsigned char>(b.rank())), r(bytes * n);
      b.alltoall(s.data(), r.data(), bytes);
      break;
    }
    case Coll::Alltoallv: {
      std::vector<std::size_t> counts(n), displs(n);
      for (int i = 0; i < n; ++i) counts[i] = bytes, displs[i] = i * bytes;
      std::vector<unsigned char> s(bytes * n, 1), r(bytes * n);
      b.alltoallv(s.data(), counts.data(), displs.data(), r.data(), counts.data(), displs.data());
      break;
    }
    case Coll::Broadcast: {
      std::vector<unsigned char> v(bytes, 7);
      b.broadcast(v.data(), bytes, iteration % n);
      break;
    }
    case Coll::Barrier:
      b.barrier();
      break;
    case Coll::Split:
      (void)b.split(b.rank() % 2, b.rank());
      break;
    case Coll::Count:
      break;
  }
}

// A survivor's failure is right when it names the victim: PeerLost with
// peer() == victim, or Aborted whose reason says the victim was lost.
bool namesVictim(const Error& e, int victim) {
  std::string lost = "lost rank " + std::to_string(victim);
  if (e.code() == ErrorCode::PeerLost) return e.peer() == victim;
  if (e.code() == ErrorCode::Aborted) return std::string(e.what()).find(lost) != std::string::npos;
  return false;
}

}  // namespace

TEST_CASE("a rank killed at a random point of a random collective: every survivor names it, none hangs",
          "[fault][peer-loss]") {
  const int trials = fault::envInt("TETHER_FAULT_TRIALS", 12);
  const unsigned seed =
      static_cast<unsigned>(fault::envInt("TETHER_FAULT_SEED", static_cast<int>(std::random_device{}())));
  std::mt19937 rng(seed);
  std::int64_t worstUs = 0, sumUs = 0;
  int reports = 0, hangs = 0;
  for (int t = 0; t < trials; ++t) {
    const int n = std::uniform_int_distribution<int>(3, 6)(rng);
    const int victim = std::uniform_int_distribution<int>(0, n - 1)(rng);
    const Coll coll = static_cast<Coll>(std::uniform_int_distribution<int>(0, static_cast<int>(Coll::Count) - 1)(rng));
    const std::size_t sizes[] = {8, 4096, 200000};
    const std::size_t bytes = sizes[std::uniform_int_distribution<int>(0, 2)(rng)];
    const int killAfterUs = std::uniform_int_distribution<int>(0, 30000)(rng);
    INFO("seed " << seed << " trial " << t << ": " << n << " ranks, kill rank " << victim << " " << killAfterUs
                 << " us into " << collName(coll) << " of " << bytes << " bytes");
    fault::SharedSlots slots(n + 1);  // slot n counts the survivors that reported
    slots[n].code = 0;
    auto res = test::runRanks(
        n,
        [&](int rank, const UniqueId& id) {
          quietChild();
          TcpBootstrap b(rank, n, id, TcpOptions{kCallTimeout, {}, {}, {}});
          if (rank == victim) {
            std::thread([&] {
              std::this_thread::sleep_for(std::chrono::microseconds(killAfterUs));
              slots[rank].eventUs = fault::nowUs();
              ::raise(SIGKILL);
            }).detach();
          }
          for (int i = 0; i < 1000000; ++i) {
            try {
              runOne(b, coll, bytes, i);
            } catch (const Error& e) {
              slots[rank].eventUs = fault::nowUs();
              slots[rank].code = static_cast<int>(e.code());
              slots[rank].peer = e.peer();
              if (rank == victim) throw;  // the victim is killed, it never fails
              test::expect(namesVictim(e, victim), "survivor should name rank " + std::to_string(victim) + ", got [" +
                                                       toString(e.code()) + "] " + e.what());
              // Stay until every survivor has reported: a survivor that closes
              // its bootstrap at once could otherwise be the first thing a slower
              // one notices ("lost rank S: it closed its bootstrap").
              slots[n].code.fetch_add(1);
              auto until = fault::nowUs() + 20000000;
              while (slots[n].code.load() < n - 1 && fault::nowUs() < until)
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
              return;
            }
          }
          throw std::runtime_error("never noticed the victim's death");
        },
        kTrialDeadline);
    INFO(test::summary(res));
    for (int r = 0; r < n; ++r) {
      if (r == victim) {
        CHECK(res[r].signal == SIGKILL);
        continue;
      }
      if (res[r].timedOut) ++hangs;
      CHECK(res[r].exitCode == 0);
      if (res[r].exitCode == 0 && slots[victim].eventUs.load() != 0) {
        auto us = slots[r].eventUs.load() - slots[victim].eventUs.load();
        if (us > 100000)
          std::printf("slow report: trial %d (%d ranks, %s of %zu bytes, victim %d): rank %d took %.1f ms, code %s\n",
                      t, n, collName(coll), bytes, victim, r, us / 1000.0,
                      toString(static_cast<ErrorCode>(slots[r].code.load())));
        worstUs = std::max(worstUs, us);
        sumUs += us;
        ++reports;
      }
    }
  }
  std::printf(
      "peer-loss trials: %d (seed %u), hangs: %d, survivor reports: %d, longest report after the kill: %.1f ms, "
      "mean %.1f ms\n",
      trials, seed, hangs, reports, worstUs / 1000.0, reports ? sumUs / 1000.0 / reports : 0.0);
  CHECK(hangs == 0);
}

TEST_CASE("ranks that do not depend on a dead rank keep working; calls that need it fail with PeerLost",
          "[fault][peer-loss]") {
  const int n = 4, victim = 3;
  fault::SharedSlots slots(n);
  auto res = test::runRanks(
      n,
      [&](int rank, const UniqueId& id) {
        quietChild();
        TcpBootstrap b(rank, n, id, TcpOptions{kCallTimeout, {}, {}, {}});
        b.barrier();  // everyone is up
        if (rank == victim) {
          slots[rank].eventUs = fault::nowUs();
          ::raise(SIGKILL);
        }
        while (slots[victim].eventUs.load() == 0) std::this_thread::sleep_for(1ms);
        std::this_thread::sleep_for(100ms);  // let the EOFs arrive
        if (rank == 1 || rank == 2) {        // point-to-point between survivors is unaffected
          int other = 3 - rank;
          for (int i = 0; i < 200; ++i) {
            int out = rank * 1000 + i, in = -1;
            if (rank == 1) {
              b.send(&out, sizeof out, other, 5);
              b.recv(&in, sizeof in, other, 5);
            } else {
              b.recv(&in, sizeof in, other, 5);
              b.send(&out, sizeof out, other, 5);
            }
            test::expect(in == other * 1000 + i, "ping-pong payload");
          }
        }
        // A receive from the dead rank fails fast, even on a rank that never
        // had a link to it.
        auto t0 = fault::nowUs();
        int x = 0;
        try {
          b.recv(&x, sizeof x, victim, 9);
          throw std::runtime_error("recv from the dead rank succeeded");
        } catch (const Error& e) {
          test::expect(e.code() == ErrorCode::PeerLost && e.peer() == victim,
                       std::string("recv from the dead rank: ") + e.what());
        }
        test::expect(fault::nowUs() - t0 < 5000000, "recv from the dead rank failed within 5 s");
        try {
          b.send(&x, sizeof x, victim, 9);
          throw std::runtime_error("send to the dead rank succeeded");
        } catch (const Error& e) {
          test::expect(e.code() == ErrorCode::PeerLost && e.peer() == victim,
                       std::string("send to the dead rank: ") + e.what());
        }
        // A world collective needs it too (its failure aborts the world, so
        // wait until the ping-pong is over).
        slots[rank].code = 0;
        for (int r : {0, 1, 2})
          while (slots[r].code.load() != 0) std::this_thread::sleep_for(1ms);
        try {
          b.barrier();
          throw std::runtime_error("barrier without the dead rank succeeded");
        } catch (const Error& e) {
          test::expect(namesVictim(e, victim), std::string("barrier: ") + e.what());
        }
      },
      30s);
  INFO(test::summary(res));
  CHECK(res[victim].signal == SIGKILL);
  for (int r = 0; r < victim; ++r) CHECK(res[r].exitCode == 0);
}

TEST_CASE("abort() on any rank ends every rank's pending and future calls with Aborted naming it",
          "[fault][peer-loss]") {
  const int n = 4;
  for (int origin = 0; origin < n; ++origin) {
    INFO("abort from rank " << origin);
    auto res = test::runRanks(
        n,
        [&](int rank, const UniqueId& id) {
          quietChild();
          TcpBootstrap b(rank, n, id, TcpOptions{kCallTimeout, {}, {}, {}});
          std::string reason = "fault test abort from rank " + std::to_string(origin);
          auto t0 = fault::nowUs();
          for (int i = 0; i < 100000; ++i) {
            try {
              b.barrier();  // the origin's notice may arrive while a peer is still in this one
              if (rank == origin && i == 1) b.abort(reason);
            } catch (const Error& e) {
              test::expect(e.code() == ErrorCode::Aborted && e.peer() == origin &&
                               std::string(e.what()).find(reason) != std::string::npos,
                           std::string("expected Aborted naming the origin, got ") + e.what());
              test::expect(fault::nowUs() - t0 < 5000000, "aborted within 5 s");
              // Later calls fail at once, too.
              int v = 0;
              try {
                b.send(&v, sizeof v, (rank + 1) % n, 1);
                throw std::runtime_error("send after abort succeeded");
              } catch (const Error& e2) {
                test::expect(e2.code() == ErrorCode::Aborted, std::string("send after abort: ") + e2.what());
              }
              return;
            }
          }
          throw std::runtime_error("never saw the abort");
        },
        30s);
    INFO(test::summary(res));
    CHECK(test::allOk(res));
  }
}

TEST_CASE("root death during rendezvous: every rank gets a clear error within its deadline", "[fault][peer-loss]") {
  const int n = 4;
  const auto timeout = 3s;
  const test::RendezvousSection rendezvous;
  fault::SharedSlots slots(n);
  auto res = test::runRanks(
      n,
      [&](int rank, const UniqueId& id) {
        quietChild();
        // Rank 1 binds the host's socket first and leads it: rank 2 learns of
        // the root's death from its leader, and must still name rank 0.
        if (rank == 0 || rank == 2) std::this_thread::sleep_for(200ms);
        TcpOptions o{timeout, {}, {}, {}};
        if (rank == 0)  // dies while ranks 1 and 2 wait for rank 3
          o.advertiseFor = [&](const std::string& hp) {
            std::thread([&] {
              std::this_thread::sleep_for(500ms);
              slots[0].eventUs = fault::nowUs();
              ::raise(SIGKILL);
            }).detach();
            return hp;
          };
        if (rank == 3) {  // arrives after the root is gone
          while (slots[0].eventUs.load() == 0) std::this_thread::sleep_for(1ms);
        }
        auto t0 = std::chrono::steady_clock::now();
        try {
          TcpBootstrap b(rank, n, id, o);
          throw std::runtime_error("rendezvous without a root succeeded");
        } catch (const Error& e) {
          auto took = std::chrono::steady_clock::now() - t0;
          test::expect(took < timeout + 2s, "failed within the deadline");
          std::string what = e.what();
          // The late rank times out, unless (host-local) it joined a leader
          // just before that leader learned of the root's death: then it is
          // told so, naming rank 0.
          if (rank == 3)
            test::expect(
                (e.code() == ErrorCode::Timeout && what.find("could not reach the root") != std::string::npos) ||
                    (!rendezvous.rootStar() && e.code() == ErrorCode::PeerLost && e.peer() == 0 &&
                     what.find("lost the root (rank 0)") != std::string::npos),
                "late rank: " + what);
          else
            test::expect(
                e.code() == ErrorCode::PeerLost && e.peer() == 0 && what.find("rendezvous") != std::string::npos,
                "waiting rank: " + what);
        }
      },
      20s);
  INFO(test::summary(res));
  CHECK(res[0].signal == SIGKILL);
  for (int r = 1; r < n; ++r) CHECK(res[r].exitCode == 0);
}

TEST_CASE("a rank dying during rendezvous aborts the ranks already registered", "[fault][peer-loss]") {
  const int n = 4, victim = 2;
  const test::RendezvousSection rendezvous;
  fault::SharedSlots slots(n);
  auto res = test::runRanks(
      n,
      [&](int rank, const UniqueId& id) {
        quietChild();
        if (rank == 3) return;  // never shows up, so the rendezvous is still open
        TcpOptions o{10s, {}, {}, {}};
        if (rank == victim)  // dies once it is registering: the root knows it
          o.advertiseFor = [](const std::string& hp) {
            std::thread([] {
              std::this_thread::sleep_for(300ms);
              ::raise(SIGKILL);
            }).detach();
            return hp;
          };
        auto t0 = std::chrono::steady_clock::now();
        try {
          TcpBootstrap b(rank, n, id, o);
          throw std::runtime_error("rendezvous with a dead rank succeeded");
        } catch (const Error& e) {
          test::expect(std::chrono::steady_clock::now() - t0 < 5s, "failed fast, not at the 10 s deadline");
          std::string what = e.what();
          // A member of the victim's host, when the victim leads it: "lost the host
          // leader of group 0 (rank 2)".
          test::expect((what.find("lost rank 2") != std::string::npos ||
                        (what.find("lost the host leader of group ") != std::string::npos &&
                         what.find("(rank 2)") != std::string::npos)) &&
                           (e.code() == ErrorCode::PeerLost || e.code() == ErrorCode::Aborted),
                       what);
        }
      },
      20s);
  INFO(test::summary(res));
  CHECK(res[victim].signal == SIGKILL);
  CHECK(res[0].exitCode == 0);
  CHECK(res[1].exitCode == 0);
}
