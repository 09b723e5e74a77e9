// Timeouts: a negative value is rejected naming where it came from, and 0
// means the default (TETHER_TIMEOUT_MS when set, else kDefaultTimeout) in
// TcpOptions, setTimeout and TETHER_TIMEOUT_MS alike.
#include <catch2/catch.hpp>

#include <string>

#include "env_guard.hpp"
#include "tether/tether.hpp"

using namespace tether;
using namespace std::chrono_literals;
using tether::test::EnvGuard;

namespace {

// A one-rank world on a root this process has already bound.
std::unique_ptr<TcpBootstrap> oneRank(const TcpOptions& options = {}) {
  return std::make_unique<TcpBootstrap>(0, 1, TcpBootstrap::createUniqueId("127.0.0.1:0"), options);
}

std::string constructionError(const TcpOptions& options = {}) {
  try {
    oneRank(options);
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
    return e.what();
  }
  FAIL("construction succeeded");
  return {};
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("TETHER_TIMEOUT_MS=-5 is rejected naming the variable", "[timeout]") {
  EnvGuard env({{"TETHER_TIMEOUT_MS", "-5"}});
  auto what = constructionError();
  INFO(what);
  CHECK(contains(what, "TETHER_TIMEOUT_MS='-5'"));
  CHECK(contains(what, "negative"));
}

TEST_CASE("a negative TcpOptions::timeout is rejected naming it", "[timeout]") {
  EnvGuard env;
  auto what = constructionError(TcpOptions{-5ms, {}, {}, {}});
  INFO(what);
  CHECK(contains(what, "TcpOptions::timeout"));
  CHECK(contains(what, "-5 ms"));
}

TEST_CASE("setTimeout(-5ms) is rejected naming the rank and the call; the timeout stays", "[timeout]") {
  EnvGuard env;
  auto b = oneRank(TcpOptions{7000ms, {}, {}, {}});
  try {
    b->setTimeout(-5ms);
    FAIL("setTimeout(-5ms) was accepted");
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(e.code() == ErrorCode::InvalidArgument);
    CHECK(contains(e.what(), "rank 0: setTimeout"));
    CHECK(contains(e.what(), "-5 ms"));
  }
  CHECK(b->timeout() == 7000ms);
  b->barrier();  // still usable, with the old deadline
}

TEST_CASE("setTimeout(0) restores the default, as 0 does in TcpOptions", "[timeout]") {
  SECTION("without TETHER_TIMEOUT_MS: kDefaultTimeout") {
    EnvGuard env;
    auto b = oneRank(TcpOptions{7000ms, {}, {}, {}});
    b->setTimeout(0ms);
    CHECK(b->timeout() == kDefaultTimeout);
    CHECK(oneRank()->timeout() == kDefaultTimeout);
    b->barrier();  // 0 is not "expire now"
  }
  SECTION("with TETHER_TIMEOUT_MS: its value") {
    EnvGuard env({{"TETHER_TIMEOUT_MS", "4321"}});
    auto b = oneRank(TcpOptions{7000ms, {}, {}, {}});
    b->setTimeout(0ms);
    CHECK(b->timeout() == 4321ms);
    CHECK(oneRank()->timeout() == 4321ms);
  }
}

TEST_CASE("TETHER_TIMEOUT_MS=0 means the default, not an expired deadline", "[timeout]") {
  EnvGuard env({{"TETHER_TIMEOUT_MS", "0"}});
  auto b = oneRank();
  CHECK(b->timeout() == kDefaultTimeout);
  b->barrier();
}

TEST_CASE("a split child inherits the parent's timeout and rejects a negative one too", "[timeout]") {
  EnvGuard env;
  auto b = oneRank(TcpOptions{6000ms, {}, {}, {}});
  auto child = b->split(0, 0);
  REQUIRE(child);
  CHECK(child->timeout() == 6000ms);
  CHECK_THROWS_AS(child->setTimeout(-1ms), Error);
  child->setTimeout(0ms);
  CHECK(child->timeout() == kDefaultTimeout);
}
