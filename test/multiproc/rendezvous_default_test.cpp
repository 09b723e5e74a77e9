// Which rendezvous runs by default (lib/rendezvous/select.cpp,
// docs/configuration.md): with no variable set, the ranks of a host register
// through their host leader (the root counts one host registration); with
// TETHER_HOST_LOCAL=0, or a rendezvous named explicitly, every rank registers
// with the root itself (N-1 registrations, no host registration).
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "multiproc.hpp"
#include "rendezvous/rendezvous.hpp"

using namespace tether;
using namespace std::chrono_literals;

namespace {

struct Env {
  explicit Env(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (const char* name : {"TETHER_HOST_LOCAL", "TETHER_RENDEZVOUS", "TETHER_LOCAL_NRANKS"}) ::unsetenv(name);
    for (auto& [k, v] : vars) ::setenv(k, v, 1);
  }
  ~Env() {
    for (const char* name : {"TETHER_HOST_LOCAL", "TETHER_RENDEZVOUS", "TETHER_LOCAL_NRANKS"}) ::unsetenv(name);
  }
};

// Runs n ranks on this host; the root checks how many host and rank
// registrations it received, and every rank uses the table.
void expectRegistrations(int n, int hostRegistrations, int rankRegistrations) {
  auto res = test::runRanks(n, [&](int rank, const UniqueId& id) {
    TcpBootstrap b(rank, n, id, TcpOptions{60s, {}, {}, {}});
    std::vector<int> out(n, rank), in(n, -1);
    b.alltoall(out.data(), in.data(), sizeof(int));
    for (int r = 0; r < n; ++r) test::expect(in[r] == r, "block " + std::to_string(r) + " from its rank");
    if (rank == 0) {
      test::expect(rdv::hostRegistrationsReceived() == hostRegistrations,
                   "host registrations at the root: " + std::to_string(rdv::hostRegistrationsReceived()) +
                       ", expected " + std::to_string(hostRegistrations));
      test::expect(rdv::rankRegistrationsReceived() == rankRegistrations,
                   "rank registrations at the root: " + std::to_string(rdv::rankRegistrationsReceived()) +
                       ", expected " + std::to_string(rankRegistrations));
    }
    b.barrier();
  });
  INFO(test::summary(res));
  CHECK(test::allOk(res));
}

}  // namespace

TEST_CASE("with no rendezvous variable set the ranks of one host register with the root once, through their leader",
          "[multiproc][rendezvous]") {
  const int n = 6;
  Env env{{"TETHER_LOCAL_NRANKS", "6"}};
  expectRegistrations(n, 1, 0);
}

TEST_CASE("TETHER_HOST_LOCAL=0 or a named root or tree rendezvous registers every rank with the root itself",
          "[multiproc][rendezvous]") {
  const int n = 6;
  SECTION("TETHER_HOST_LOCAL=0: auto picks the root star") {
    Env env{{"TETHER_HOST_LOCAL", "0"}, {"TETHER_LOCAL_NRANKS", "6"}};
    expectRegistrations(n, 0, n - 1);
  }
  SECTION("TETHER_RENDEZVOUS=root, even with TETHER_HOST_LOCAL=1") {
    Env env{{"TETHER_RENDEZVOUS", "root"}, {"TETHER_HOST_LOCAL", "1"}, {"TETHER_LOCAL_NRANKS", "6"}};
    expectRegistrations(n, 0, n - 1);
  }
  SECTION("TETHER_RENDEZVOUS=tree") {
    Env env{{"TETHER_RENDEZVOUS", "tree"}, {"TETHER_LOCAL_NRANKS", "6"}};
    expectRegistrations(n, 0, n - 1);
  }
}
