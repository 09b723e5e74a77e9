// allgather-setup — the setup phase of a communication runtime, end to end:
// bootstrap, all-gather a per-rank endpoint record, all-to-all a per-pair
// record, barrier, RDMA queue-pair bring-up, and a byte-for-byte check of
// everything received.
//
//   allgather-setup --nranks 8             start 8 local ranks (fork)
//   mpirun -np 8 allgather-setup           or torchrun / srun: ranks from the env
//
// Prints a per-phase timing table (slowest rank per phase) and, on success,
// the final line "allgather-setup: OK nranks=N".
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cxxopts.hpp>
#include <string>
#include <vector>

#include "rdma_flow.hpp"
#include "tether/tether.hpp"

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kEndpointBytes = 64;  // what a runtime publishes per rank
constexpr std::size_t kPairBytes = 32;      // what it sends each peer

// Deterministic contents, so every received byte can be checked.
unsigned char endpointByte(int rank, std::size_t i) { return static_cast<unsigned char>(rank * 37 + i * 11 + 5); }
unsigned char pairByte(int src, int dst, std::size_t i) {
  return static_cast<unsigned char>(src * 53 + dst * 29 + i * 3 + 1);
}

struct Phase {
  std::string name;
  double ms;
};

class Timer {
 public:
  template <class F>
  void run(const std::string& name, F&& f) {
    auto t0 = Clock::now();
    f();
    phases.push_back({name, std::chrono::duration<double, std::milli>(Clock::now() - t0).count()});
  }
  std::vector<Phase> phases;
};

void fail(const tether::Bootstrap& b, const std::string& what) {
  throw tether::Error(tether::ErrorCode::Protocol, "rank " + std::to_string(b.rank()) + ": " + what, b.rank());
}

// One rank's whole setup. Returns 0 on success; rank 0 prints the table.
int runRank(const std::function<std::unique_ptr<tether::Bootstrap>()>& connect, const std::string& verbs) {
  Timer timer;
  std::unique_ptr<tether::Bootstrap> b;
  timer.run("bootstrap", [&] { b = connect(); });
  const int n = b->size(), r = b->rank();

  std::vector<unsigned char> endpoints(n * kEndpointBytes);
  timer.run("allgather endpoints", [&] {
    for (std::size_t i = 0; i < kEndpointBytes; ++i) endpoints[r * kEndpointBytes + i] = endpointByte(r, i);
    b->allgather(endpoints.data(), kEndpointBytes);
  });
  for (int s = 0; s < n; ++s)
    for (std::size_t i = 0; i < kEndpointBytes; ++i)
      if (endpoints[s * kEndpointBytes + i] != endpointByte(s, i))
        fail(*b, "endpoint record of rank " + std::to_string(s) + " byte " + std::to_string(i) + " is wrong");

  std::vector<unsigned char> out(n * kPairBytes), in(n * kPairBytes);
  timer.run("alltoall pair records", [&] {
    for (int d = 0; d < n; ++d)
      for (std::size_t i = 0; i < kPairBytes; ++i) out[d * kPairBytes + i] = pairByte(r, d, i);
    b->alltoall(out.data(), in.data(), kPairBytes);
  });
  for (int s = 0; s < n; ++s)
    for (std::size_t i = 0; i < kPairBytes; ++i)
      if (in[s * kPairBytes + i] != pairByte(s, r, i))
        fail(*b, "pair record from rank " + std::to_string(s) + " byte " + std::to_string(i) + " is wrong");

  timer.run("barrier", [&] { b->barrier(); });

  RdmaFlowResult rdma;
  timer.run("rdma (total)", [&] { rdma = runRdmaFlow(*b, verbs); });
  for (auto& [name, ms] : rdma.phaseMs) timer.phases.push_back({"  rdma " + name, ms});

  // Gather every rank's timings and QP count to rank 0.
  const std::size_t np = timer.phases.size();
  std::vector<double> times(n * (np + 1));
  for (std::size_t p = 0; p < np; ++p) times[r * (np + 1) + p] = timer.phases[p].ms;
  times[r * (np + 1) + np] = rdma.qpsAtRts;
  b->allgather(times.data(), (np + 1) * sizeof(double));
  b->barrier();
  if (r != 0) return 0;

  std::printf("%-24s %12s %12s\n", "phase", "max ms", "rank 0 ms");
  for (std::size_t p = 0; p < np; ++p) {
    double worst = 0;
    for (int s = 0; s < n; ++s) worst = std::max(worst, times[s * (np + 1) + p]);
    std::printf("%-24s %12.3f %12.3f\n", timer.phases[p].name.c_str(), worst, timer.phases[p].ms);
  }
  long qps = 0;
  for (int s = 0; s < n; ++s) qps += static_cast<long>(times[s * (np + 1) + np]);
  if (!rdma.note.empty()) std::printf("rdma: %s\n", rdma.note.c_str());
  std::printf("QPs at RTS: %ld (%d x %d)%s\n", qps, n, n - 1,
              rdma.rdmaWriteChecked ? ", RDMA-write all-gather checked byte for byte" : "");
  std::printf("verified: %d endpoint records (%zu B each), %d pair records (%zu B each)\n", n, kEndpointBytes, n * n,
              kPairBytes);
  std::fflush(stdout);
  return 0;
}

int guarded(const std::function<int()>& body, int rankHint) {
  try {
    return body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "allgather-setup: FAILED (rank %d): %s\n", rankHint, e.what());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  cxxopts::Options cli("allgather-setup", "A runtime's all-gather setup over tether, verified byte for byte");
  cli.add_options()("nranks",
                    "start this many local ranks (otherwise read rank/size/root from the launcher's environment)",
                    cxxopts::value<int>()->default_value("0"))("verbs", "RDMA backend: auto|real|fake|none",
                                                               cxxopts::value<std::string>()->default_value("auto"))(
      "timeout-ms", "deadline for every bootstrap call (default: TETHER_TIMEOUT_MS, else 300000)",
      cxxopts::value<long>())("h,help", "show this help");
  cxxopts::ParseResult args;
  try {
    args = cli.parse(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "allgather-setup: %s\n%s", e.what(), cli.help().c_str());
    return 2;
  }
  if (args.count("help")) {
    std::printf("%s", cli.help().c_str());
    return 0;
  }
  const int nranks = args["nranks"].as<int>();
  const std::string verbs = args["verbs"].as<std::string>();
  if (verbs != "auto" && verbs != "real" && verbs != "fake" && verbs != "none") {
    std::fprintf(stderr, "allgather-setup: --verbs must be auto, real, fake or none\n");
    return 2;
  }
  tether::TcpOptions options;  // timeout 0: TETHER_TIMEOUT_MS, else the library default
  if (args.count("timeout-ms")) options.timeout = std::chrono::milliseconds(args["timeout-ms"].as<long>());

  if (nranks <= 0) {  // under a launcher
    int rank = -1, size = 0;
    int rc = guarded(
        [&] {
          return runRank(
              [&] {
                auto b = tether::TcpBootstrap::fromEnvironment(options);
                rank = b->rank();
                size = b->size();
                return std::unique_ptr<tether::Bootstrap>(std::move(b));
              },
              verbs);
        },
        rank);
    if (rc == 0 && rank == 0) std::printf("allgather-setup: OK nranks=%d\n", size);
    return rc;
  }

  // Local mode: fork the ranks; the root port is bound before forking.
  auto id = tether::TcpBootstrap::createUniqueId("127.0.0.1:0");
  std::vector<pid_t> pids;
  for (int r = 0; r < nranks; ++r) {
    pid_t pid = ::fork();
    if (pid < 0) {
      std::perror("allgather-setup: fork");
      return 1;
    }
    if (pid == 0) {
      int rc = guarded(
          [&] {
            return runRank([&] { return std::make_unique<tether::TcpBootstrap>(r, nranks, id, options); }, verbs);
          },
          r);
      std::fflush(nullptr);
      ::_exit(rc);
    }
    pids.push_back(pid);
  }
  tether::TcpBootstrap::forgetUniqueId(id);
  int failed = 0;
  for (std::size_t r = 0; r < pids.size(); ++r) {
    int status = 0;
    ::waitpid(pids[r], &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  if (failed) {
    std::fprintf(stderr, "allgather-setup: FAILED: %d of %d ranks failed\n", failed, nranks);
    return 1;
  }
  std::printf("allgather-setup: OK nranks=%d\n", nranks);
  return 0;
}
