// Reading TETHER_IB_* variables: defaults, values, and errors that name the
// variable. The queue pair's attributes are keys of one variable,
// TETHER_IB_QP (issue 24: TETHER_IB_TIMEOUT, _RETRY_CNT, _RNR_RETRY,
// _MIN_RNR_TIMER, _SL, _TC and _RD_ATOMIC before).
#include <catch2/catch.hpp>

#include <sys/socket.h>

#include <cstdlib>

#include "tether/error.hpp"
#include "tether/rdma/config.hpp"

using namespace tether::rdma;

namespace {

const char* const kVars[] = {"TETHER_IB_HCA", "TETHER_IB_GID_INDEX", "TETHER_IB_ADDR_FAMILY", "TETHER_IB_QP"};

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
  ::setenv("TETHER_IB_QP", "timeout=14,retry_cnt=5,rnr_retry=6,min_rnr_timer=20,sl=3,tc=106,rd_atomic=4", 1);
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
      {"TETHER_IB_QP", "timeout=32"},   {"TETHER_IB_QP", "timeout=abc"}, {"TETHER_IB_QP", "retry_cnt=8"},
      {"TETHER_IB_QP", "rnr_retry=-1"}, {"TETHER_IB_GID_INDEX", "256"},  {"TETHER_IB_QP", "sl=16"},
      {"TETHER_IB_ADDR_FAMILY", "ipx"}, {"TETHER_IB_HCA", "mlx5_0:x"},   {"TETHER_IB_HCA", ":1"},
      {"TETHER_IB_QP", "rd_atomic=0"},  {"TETHER_IB_QP", "tc=3 "},       {"TETHER_IB_QP", "sl=1,sl=2"},
      {"TETHER_IB_QP", "service=3"},    {"TETHER_IB_QP", "sl"},          {"TETHER_IB_QP", "sl=1,"},
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
  ::setenv("TETHER_IB_QP", "timeout=40", 1);
  try {
    Config::fromEnvironment(5);
    FAIL("accepted");
  } catch (const tether::Error& e) {
    CHECK(e.rank() == 5);
    CHECK_THAT(e.what(), Catch::StartsWith("rank 5: rdma config: TETHER_IB_QP=\"timeout=40\""));
  }
}

TEST_CASE("an out-of-range value says out of range, a non-number says not an integer", "[rdma][config]") {
  CleanEnv env;
  ::setenv("TETHER_IB_QP", "timeout=40", 1);
  CHECK_THROWS_WITH(Config::fromEnvironment(),
                    "rdma config: TETHER_IB_QP=\"timeout=40\" is not valid (timeout=40 is out of range [1, 31])");
  ::setenv("TETHER_IB_QP", "sl=2,timeout=99999999999999999999", 1);
  CHECK_THROWS_WITH(Config::fromEnvironment(), Catch::Contains("is out of range [1, 31])"));
  ::setenv("TETHER_IB_QP", "timeout=fast", 1);
  CHECK_THROWS_WITH(Config::fromEnvironment(),
                    "rdma config: TETHER_IB_QP=\"timeout=fast\" is not valid (timeout='fast' is not an integer)");
  ::setenv("TETHER_IB_GID_INDEX", "256", 1);
  ::unsetenv("TETHER_IB_QP");
  CHECK_THROWS_WITH(Config::fromEnvironment(),
                    "rdma config: TETHER_IB_GID_INDEX=\"256\" is not valid (out of range [0, 255])");
}

TEST_CASE("TETHER_IB_QP sets only the keys it names, in any order", "[rdma][config]") {
  CleanEnv env;
  ::setenv("TETHER_IB_QP", "tc=106,sl=3", 1);
  const Config c = Config::fromEnvironment();
  CHECK(c.serviceLevel == 3);
  CHECK(c.trafficClass == 106);
  CHECK(c.timeout == 20);  // the defaults of the others
  CHECK(c.retryCount == 7);
  CHECK(c.rdAtomic == 1);
}
