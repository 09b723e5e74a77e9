// The C++ blocks of README.md ("Use") and docs/testing-api.md (the first
// block), compiled and run; check_snippets.py keeps the documents' copies
// identical to these files.
#include <catch2/catch.hpp>

#include "multiproc.hpp"
#include "readme_use.hpp"
#include "testing_api_use.hpp"

TEST_CASE("README's Use block exchanges every rank's record", "[docs]") {
  const std::string text = makeId();
  auto res = tether::test::runRanks(3, [&](int rank, const tether::UniqueId&) {
    auto all = exchange(rank, 3, text, QpInfo{100u + rank, static_cast<std::uint16_t>(rank)});
    for (int r = 0; r < 3; ++r)
      tether::test::expect(all[r].qpn == 100u + r && all[r].lid == r, "record of rank " + std::to_string(r));
  });
  INFO(tether::test::summary(res));
  REQUIRE(tether::test::allOk(res));
}

TEST_CASE("testing-api.md's first block runs its runtime on four in-process ranks", "[docs]") {
  REQUIRE_NOTHROW(testConnectAll());
}
