// LazyLibrary: a library opened on first use (libpmix, libibverbs).
#include <catch2/catch.hpp>

#include <cstring>

#include "base/lazy_library.hpp"

using tether::LazyLibrary;

TEST_CASE("a library that cannot be loaded names itself and the loader's reason, and yields no symbols",
          "[unit][lazy]") {
  LazyLibrary missing({"libtether-no-such-library.so.7", "/nonexistent/libtether-no-such-library.so.7"});
  CHECK_FALSE(missing.load());
  CHECK_THAT(missing.error(), Catch::StartsWith("cannot load libtether-no-such-library.so.7 (") &&
                                  Catch::Contains("/nonexistent/libtether-no-such-library.so.7"));
  CHECK(missing.symbol("anything") == nullptr);
}

TEST_CASE("a loadable library is opened once and its functions are found by name", "[unit][lazy]") {
  LazyLibrary libc({"libtether-no-such-library.so.7", "libc.so.6"});  // the first that loads
  REQUIRE(libc.load());
  CHECK(libc.error().empty());
  auto length = libc.function<std::size_t (*)(const char*)>("strlen");
  REQUIRE(length != nullptr);
  CHECK(length("tether") == 6);
  CHECK(libc.symbol("tether_no_such_symbol") == nullptr);
}
