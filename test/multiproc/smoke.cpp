#include <catch2/catch.hpp>
#include <cstring>
#include <vector>
#include "multiproc.hpp"
using namespace tether;
TEST_CASE("smoke allgather") {
  for (int n : {1, 2, 3, 5, 8}) {
    auto res = test::runRanks(n, [n](int rank, const UniqueId& id) {
      TcpBootstrap b(rank, n, id, TcpOptions{std::chrono::milliseconds(10000)});
      std::vector<int> v(n * 16, -1);
      for (int i = 0; i < 16; ++i) v[rank * 16 + i] = rank * 1000 + i;
      b.allgather(v.data(), 16 * sizeof(int));
      for (int r = 0; r < n; ++r) for (int i = 0; i < 16; ++i) test::expect(v[r * 16 + i] == r * 1000 + i, "content");
      b.barrier();
    });
    INFO(test::summary(res));
    REQUIRE(test::allOk(res));
  }
}
