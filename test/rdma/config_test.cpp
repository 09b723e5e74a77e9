// Reading TETHER_IB_* variables: defaults, values, and errors that name the variable.
#include <catch2/catch.hpp>

#include <sys/socket.h>

#include <cstdlib>

#include "tether/error.hpp"
#include "tether/rdma/config.hpp"

using namespace tether::rdma;

namespace {

const char* const kVars[] = {"TETHER_IB_HCA",           "TETHER_IB_GID_INDEX", "TETHER_IB_ADDR_FAMILY",
                             "TETHER_IB_TIMEOUT",       "TETHER_IB_RETRY_CNT", "TETHER_IB_RNR_RETRY",
                             "TETHER_IB_MIN_RNR_TIMER", "TETHER_IB_SL",        "TETHER_IB_TC",
                             "TETHER_IB_RD_ATOMIC"};

// Clears the variables on entry and exit.
struct CleanEnv {
  CleanEnv() { clear(); }
  ~CleanEnv() { clear(); }
  static void clear() {
    for (const char* v : kVars) ::unsetenv(v);
  }
};

}  // namespace

TEST_CASE("defaults without any variable", "[rdma][config]") {
  CleanEnv env;
  const Config c = Config::fromEnvironment();
  CHECK(c.hca.empty());
  CHECK(c.hcaPort == 0);
  CHECK(c.gidIndex == -1);
  CHECK(c.addressFamily == AF_INET);
  CHECK(c.timeout == 20);
  CHECK(c.retryCount == 7);
  CHECK(c.rnrRetry == 7);
  CHECK(c.minRnrTimer == 12);
  CHECK(c.serviceLevel == 0);
  CHECK(c.trafficClass == 0);
  CHECK(c.rdAtomic == 1);
}

TEST_CASE("variables set the values", "[rdma][config]") {
  CleanEnv env;
  ::setenv("TETHER_IB_HCA", "mlx5_3:2", 1);
  ::setenv("TETHER_IB_GID_INDEX", "3", 1);
  ::setenv("TETHER_IB_ADDR_FAMILY", "AF_INET6", 1);
  ::setenv("TETHER_IB_TIMEOUT", "14", 1);
  ::setenv("TETHER_IB_RETRY_CNT", "5", 1);
  ::setenv("TETHER_IB_RNR_RETRY", "6", 1);
  ::setenv("TETHER_IB_MIN_RNR_TIMER", "20", 1);
  ::setenv("TETHER_IB_SL", "3", 1);
  ::setenv("TETHER_IB_TC", "106", 1);
  ::setenv("TETHER_IB_RD_ATOMIC", "4", 1);
  const Config c = Config::fromEnvironment();
  CHECK(c.hca == "mlx5_3");
  CHECK(c.hcaPort == 2);
  CHECK(c.gidIndex == 3);
  CHECK(c.addressFamily == AF_INET6);
  CHECK(c.timeout == 14);
  CHECK(c.retryCount == 5);
  CHECK(c.rnrRetry == 6);
  CHECK(c.minRnrTimer == 20);
  CHECK(c.serviceLevel == 3);
  CHECK(c.trafficClass == 106);
  CHECK(c.rdAtomic == 4);
}

TEST_CASE("bad values are InvalidArgument naming the variable and value", "[rdma][config]") {
  const std::pair<const char*, const char*> bad[] = {
      {"TETHER_IB_TIMEOUT", "32"},      {"TETHER_IB_TIMEOUT", "abc"},   {"TETHER_IB_RETRY_CNT", "8"},
      {"TETHER_IB_RNR_RETRY", "-1"},    {"TETHER_IB_GID_INDEX", "256"}, {"TETHER_IB_SL", "16"},
      {"TETHER_IB_ADDR_FAMILY", "ipx"}, {"TETHER_IB_HCA", "mlx5_0:x"},  {"TETHER_IB_HCA", ":1"},
      {"TETHER_IB_RD_ATOMIC", "0"},     {"TETHER_IB_TC", "3 "},
  };
  for (const auto& [name, value] : bad) {
    CleanEnv env;
    ::setenv(name, value, 1);
    INFO(name << "=" << value);
    try {
      Config::fromEnvironment();
      FAIL("accepted");
    } catch (const tether::Error& e) {
      CHECK(e.code() == tether::ErrorCode::InvalidArgument);
      CHECK_THAT(e.what(), Catch::Contains(name) && Catch::Contains(value));
    }
  }
}

TEST_CASE("an empty variable means unset", "[rdma][config]") {
  CleanEnv env;
  ::setenv("TETHER_IB_GID_INDEX", "", 1);
  CHECK(Config::fromEnvironment().gidIndex == -1);
}

TEST_CASE("a known rank prefixes the message", "[rdma][config]") {
  CleanEnv env;
  ::setenv("TETHER_IB_TIMEOUT", "40", 1);
  try {
    Config::fromEnvironment(5);
    FAIL("accepted");
  } catch (const tether::Error& e) {
    CHECK(e.rank() == 5);
    CHECK_THAT(e.what(), Catch::StartsWith("rank 5: rdma config: TETHER_IB_TIMEOUT=\"40\""));
  }
}

TEST_CASE("an out-of-range value says out of range, a non-number says not an integer", "[rdma][config]") {
  CleanEnv env;
  ::setenv("TETHER_IB_TIMEOUT", "40", 1);
  CHECK_THROWS_WITH(Config::fromEnvironment(),
                    "rdma config: TETHER_IB_TIMEOUT=\"40\" is not valid (out of range [1, 31])");
  ::setenv("TETHER_IB_TIMEOUT", "99999999999999999999", 1);
  CHECK_THROWS_WITH(Config::fromEnvironment(), Catch::Contains("(out of range [1, 31])"));
  ::setenv("TETHER_IB_TIMEOUT", "fast", 1);
  CHECK_THROWS_WITH(Config::fromEnvironment(), "rdma config: TETHER_IB_TIMEOUT=\"fast\" is not valid (not an integer)");
}
