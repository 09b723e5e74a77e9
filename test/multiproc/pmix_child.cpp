// Started by mpirun with TETHER_RENDEZVOUS=pmix (test/multiproc/pmix_launch.sh):
// rank and size from the launcher, every address from PMIx; no root, no id.
// Prints "init <ms>" for the benchmark (docs/benchmarks.md, "PMIx rendezvous").
// With --expect-error TEXT [timeout], fromEnvironment must fail with an error
// containing TEXT, of code InvalidArgument (or Timeout).
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tether/tcp_bootstrap.hpp"

int main(int argc, char** argv) {
  if (argc >= 3 && std::strcmp(argv[1], "--expect-error") == 0) {
    const auto want = argc > 3 && std::strcmp(argv[3], "timeout") == 0 ? tether::ErrorCode::Timeout
                                                                       : tether::ErrorCode::InvalidArgument;
    try {
      auto b = tether::TcpBootstrap::fromEnvironment();
      std::fprintf(stderr, "FAIL: fromEnvironment succeeded without a PMIx launcher\n");
      return 1;
    } catch (const tether::Error& e) {
      std::printf("error: %s\n", e.what());
      if (std::string(e.what()).find(argv[2]) == std::string::npos) {
        std::fprintf(stderr, "FAIL: the error does not contain '%s'\n", argv[2]);
        return 1;
      }
      if (e.code() != want) {
        std::fprintf(stderr, "FAIL: the error has the wrong code\n");
        return 1;
      }
      std::printf("PASS\n");
      return 0;
    }
  }
  try {
    auto t0 = std::chrono::steady_clock::now();
    auto b = tether::TcpBootstrap::fromEnvironment();
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const int n = b->size(), me = b->rank();
    std::vector<int> v(n, -1);
    v[me] = me * 3 + 1;
    b->allgather(v.data(), sizeof(int));
    for (int r = 0; r < n; ++r)
      if (v[r] != r * 3 + 1) {
        std::fprintf(stderr, "rank %d: allgather block %d is %d\n", me, r, v[r]);
        return 1;
      }
    std::vector<int> send(n), recv(n, -1);
    for (int r = 0; r < n; ++r) send[r] = me * 1000 + r;
    b->alltoall(send.data(), recv.data(), sizeof(int));
    for (int r = 0; r < n; ++r)
      if (recv[r] != r * 1000 + me) {
        std::fprintf(stderr, "rank %d: alltoall block from %d is %d\n", me, r, recv[r]);
        return 1;
      }
    b->barrier();
    std::printf("rank %d of %d OK init %.1f ms\n", me, n, ms);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pmix_child: %s\n", e.what());
    return 1;
  }
}
