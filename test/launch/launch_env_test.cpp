// fromEnvironment(): which launcher's rank and size win, and what a
// contradictory, half-set or malformed launch environment says. Conflicts
// must fail before any socket is opened, naming the variables involved.
#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

#include "env_guard.hpp"
#include "tether/tether.hpp"

using namespace tether;
using tether::test::EnvGuard;

namespace {

// An id for a one-rank world whose root this process has already bound.
std::string localUid() { return TcpBootstrap::createUniqueId("127.0.0.1:0").toString(); }

using Vars = std::vector<std::pair<std::string, std::string>>;

// fromEnvironment() with only `vars` set must fail with InvalidArgument whose
// message holds each of `parts`. (Roots in `vars` never answer and the
// deadline is short, so a wrong start ends quickly as a failure.)
std::string expectLaunchError(const Vars& vars, const std::vector<std::string>& parts) {
  EnvGuard env({{"TETHER_TIMEOUT_MS", "1000"}});
  for (const auto& [name, value] : vars) env.set(name, value);
  try {
    auto b = TcpBootstrap::fromEnvironment();
    FAIL("fromEnvironment() succeeded");
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(e.code() == ErrorCode::InvalidArgument);
    for (const auto& part : parts) CHECK(std::string(e.what()).find(part) != std::string::npos);
    return e.what();
  }
  return {};
}

const std::pair<std::string, std::string> kDeadRoot{"TETHER_ROOT", "127.0.0.1:1"};

}  // namespace

TEST_CASE("a leftover RANK that disagrees with Open MPI's rank fails naming both variables", "[launch]") {
  expectLaunchError(
      {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}, kDeadRoot},
      {"RANK=0", "OMPI_COMM_WORLD_RANK=1"});
}

TEST_CASE("Open MPI and PMI variables that disagree on the size fail naming both", "[launch]") {
  expectLaunchError(
      {{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"PMI_RANK", "1"}, {"PMI_SIZE", "2"}, kDeadRoot},
      {"OMPI_COMM_WORLD_SIZE=4", "PMI_SIZE=2"});
}

TEST_CASE("half of a launcher's pair names the missing variable", "[launch]") {
  expectLaunchError({{"RANK", "1"}, kDeadRoot}, {"RANK=1 is set but WORLD_SIZE is not"});
  expectLaunchError({{"TETHER_NRANKS", "4"}, {"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "4"}, kDeadRoot},
                    {"TETHER_NRANKS=4 is set but TETHER_RANK is not"});
}

TEST_CASE("a bad MASTER_PORT names the variable", "[launch]") {
  for (std::string port : {"29x00", "0", "70000", "-1"})
    expectLaunchError({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port}},
                      {"MASTER_PORT='" + port + "'"});
}

TEST_CASE("a rank outside the world, or a malformed TETHER_UID, names its variables", "[launch]") {
  expectLaunchError({{"OMPI_COMM_WORLD_RANK", "4"}, {"OMPI_COMM_WORLD_SIZE", "4"}, kDeadRoot},
                    {"OMPI_COMM_WORLD_RANK=4", "OMPI_COMM_WORLD_SIZE=4"});
  // The id holds the secret: the message names the variable, not its value.
  auto what = expectLaunchError({{"TETHER_RANK", "0"}, {"TETHER_NRANKS", "1"}, {"TETHER_UID", "5ec7e75ec7e7"}},
                                {"TETHER_UID: invalid tether UniqueId"});
  CHECK(what.find("5ec7e75ec7e7") == std::string::npos);
}

TEST_CASE("a TETHER_ROOT without a port says so; an IPv6 one says how to write it", "[launch]") {
  const Vars rank = {{"TETHER_RANK", "1"}, {"TETHER_NRANKS", "2"}};
  auto what = expectLaunchError({rank[0], rank[1], {"TETHER_ROOT", "node7"}}, {"root address 'node7' needs a port"});
  CHECK(what.find("IPv6") == std::string::npos);
  expectLaunchError(
      {rank[0], rank[1], {"TETHER_ROOT", "fd00::2:29618"}},
      {"TETHER_ROOT='fd00::2:29618'", "root address 'fd00::2:29618' needs a port (IPv6: write [addr]:port)"});
}

TEST_CASE("launch environments without a conflict start the world", "[launch]") {
  const std::pair<const char*, Vars> cases[] = {
      {"torchrun and Open MPI agree",
       {{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "1"}}},
      // Slurm's task numbers are the outer launch: torchrun's ranks inside srun win.
      {"torchrun inside srun", {{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"}, {"RANK", "0"}, {"WORLD_SIZE", "1"}}},
      {"TETHER_RANK and TETHER_NRANKS override every launcher",
       {{"TETHER_RANK", "0"},
        {"TETHER_NRANKS", "1"},
        {"RANK", "5"},
        {"WORLD_SIZE", "8"},
        {"OMPI_COMM_WORLD_RANK", "2"},
        {"OMPI_COMM_WORLD_SIZE", "4"}}},
  };
  for (const auto& [why, vars] : cases) {
    INFO(why);
    EnvGuard env({{"TETHER_UID", localUid()}, {"TETHER_TIMEOUT_MS", "10000"}});
    for (const auto& [name, value] : vars) env.set(name, value);
    auto b = TcpBootstrap::fromEnvironment();
    CHECK(b->rank() == 0);
    CHECK(b->size() == 1);
  }
}
