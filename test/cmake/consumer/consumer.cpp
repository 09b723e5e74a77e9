// Every rank contributes one record; every rank gets all of them.
#include <tether/tether.hpp>

#include <cstdio>
#include <vector>

int main() {
  try {
    // Rank, size and root from the launcher (TETHER_RANK/TETHER_NRANKS/TETHER_UID_FILE, torchrun, mpirun, srun).
    auto boot = tether::TcpBootstrap::fromEnvironment();
    std::vector<int> all(static_cast<std::size_t>(boot->size()));
    all[static_cast<std::size_t>(boot->rank())] = 100 + boot->rank();
    boot->allgather(all.data(), sizeof(int));
    for (int r = 0; r < boot->size(); ++r) {
      if (all[static_cast<std::size_t>(r)] != 100 + r) {
        std::fprintf(stderr, "rank %d: block %d is %d\n", boot->rank(), r, all[static_cast<std::size_t>(r)]);
        return 1;
      }
    }
    boot->barrier();
    std::printf("consumer_cpp: rank %d of %d: allgather ok\n", boot->rank(), boot->size());
    return 0;
  } catch (const tether::Error& e) {
    std::fprintf(stderr, "consumer_cpp: %s: %s\n", tether::toString(e.code()), e.what());
    return 1;
  }
}
