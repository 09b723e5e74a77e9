// Started by mpirun (test/multiproc/mpirun_launch.sh): rank, size and root
// come from the launcher's environment only.
#include <cstdio>
#include <vector>

#include "tether/tcp_bootstrap.hpp"

int main() {
  try {
    auto b = tether::TcpBootstrap::fromEnvironment();
    std::vector<int> v(b->size(), -1);
    v[b->rank()] = b->rank() * 3;
    b->allgather(v.data(), sizeof(int));
    for (int r = 0; r < b->size(); ++r)
      if (v[r] != r * 3) {
        std::fprintf(stderr, "rank %d: block %d is %d\n", b->rank(), r, v[r]);
        return 1;
      }
    b->barrier();
    std::printf("rank %d of %d OK (per node %d)\n", b->rank(), b->size(), b->nranksPerNode());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "launch_env_child: %s\n", e.what());
    return 1;
  }
}
