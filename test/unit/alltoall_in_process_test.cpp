// alltoall over the in-process testing world, which replays the same plans
// as TcpBootstrap. The testing world reads TETHER_ALGO (alltoall=...) once per
// process, so meson runs this program once per row (test/unit/meson.build)
// and once with none set: then the automatic choice runs, tree or Bruck
// depending on whether a "node" runs more ranks than this machine has cores.
#include <catch2/catch.hpp>
#include <tether/testing/in_process.hpp>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "tether/detail/coll/settings.hpp"

using tether::Bootstrap;
using tether::testing::InProcessWorld;
namespace dc = tether::detail::coll;

namespace {

unsigned char pattern(int src, int dst, std::size_t i) {
  return static_cast<unsigned char>(src * 131 + dst * 17 + i * 7 + 3);
}

// Runs alltoall (in place too) on n ranks, perNode of them per "node", and
// checks every byte.
void check(int n, int perNode, std::size_t bytes) {
  INFO("N=" << n << " per node " << perNode << " bytes " << bytes);
  InProcessWorld world(n, perNode);
  std::vector<std::vector<unsigned char>> got(static_cast<std::size_t>(n)), gotInPlace(static_cast<std::size_t>(n));
  world.run([&](Bootstrap& b) {
    const int r = b.rank();
    std::vector<unsigned char> send(static_cast<std::size_t>(n) * bytes), recv(send.size(), 0xEE);
    for (int d = 0; d < n; ++d)
      for (std::size_t i = 0; i < bytes; ++i) send[static_cast<std::size_t>(d) * bytes + i] = pattern(r, d, i);
    std::vector<unsigned char> both = send;
    b.alltoall(send.data(), recv.data(), bytes);
    b.alltoall(both.data(), both.data(), bytes);
    got[static_cast<std::size_t>(r)] = recv;
    gotInPlace[static_cast<std::size_t>(r)] = both;
  });
  for (int r = 0; r < n; ++r)
    for (int s = 0; s < n; ++s)
      for (std::size_t i = 0; i < bytes; ++i) {
        const std::size_t at = static_cast<std::size_t>(s) * bytes + i;
        if (got[r][at] != pattern(s, r, i) || gotInPlace[r][at] != pattern(s, r, i))
          FAIL("rank " << r << " byte " << i << " of the block from rank " << s);
      }
}

}  // namespace

TEST_CASE("alltoall over the in-process world delivers every block for N = 1..17 and blocks of 0, 1, 7 and 64 bytes",
          "[unit][alltoall]") {
  // meson gives TETHER_ALGO=alltoall=<row>.
  const char* algo = std::getenv("TETHER_ALGO");
  std::string forced = algo && std::string(algo).rfind("alltoall=", 0) == 0 ? algo + 9 : "";
  if (forced == "auto") forced.clear();
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int n = 1; n <= 17; ++n) {
    for (int perNode : {n, 1}) {
      // The row the world runs is the one the table picks for this environment.
      dc::Shape shape = dc::loadSettings().tuning;
      shape.size = n;
      shape.cpuBound = perNode > cores;
      dc::Call call;
      call.op = dc::Op::Alltoall;
      call.bytes = 64;
      const std::string name = dc::choose(shape, call, dc::loadSettings().forcedFor(call.op))->name;
      if (!forced.empty())
        CHECK(name == forced);
      else
        CHECK(name == (shape.cpuBound ? "tree" : "bruck"));
      for (std::size_t bytes : {0, 1, 7, 64}) check(n, perNode, bytes);
    }
  }
}
