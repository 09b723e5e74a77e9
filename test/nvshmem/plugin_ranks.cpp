// plugin_ranks.cpp — forked ranks that drive the NVSHMEM plug-in as NVSHMEM
// would, with this rank's listener behind a chaos proxy (through the plug-in's
// tether_nvshmem_set_options extension: an advertise_for callback).
#include "plugin_ranks.hpp"

#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

#include "chaos_proxy.hpp"
#include "join_snippet.hpp"  // docs/integration.md, verbatim
#include "multiproc.hpp"
#include "plugin_loader.hpp"
#include "payload.hpp"

namespace tether::test {

UidPipes::UidPipes(int nranks) {
  for (int r = 0; r < nranks; ++r) {
    int p[2];
    if (::pipe(p) != 0) throw std::runtime_error("pipe failed");
    readEnds.push_back(p[0]);
    writeEnds.push_back(p[1]);
  }
}

UidPipes::~UidPipes() {
  for (int fd : readEnds) ::close(fd);
  for (int fd : writeEnds) ::close(fd);
}

void UidPipes::send(const unsigned char* uid) const {
  for (std::size_t r = 1; r < writeEnds.size(); ++r)
    expect(::write(writeEnds[r], uid, TETHER_NVSHMEM_UID_BYTES) == TETHER_NVSHMEM_UID_BYTES, "writing the uid");
}

void UidPipes::receive(int rank, unsigned char* uid, std::chrono::milliseconds wait) const {
  pollfd p{readEnds[static_cast<std::size_t>(rank)], POLLIN, 0};
  expect(::poll(&p, 1, static_cast<int>(wait.count())) == 1, "rank 0 did not hand out the unique id in time");
  expect(::read(p.fd, uid, TETHER_NVSHMEM_UID_BYTES) == TETHER_NVSHMEM_UID_BYTES, "reading the uid");
}

RankTally* sharedTallies(int nranks) {
  void* p = ::mmap(nullptr, sizeof(RankTally) * static_cast<std::size_t>(nranks), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::runtime_error("mmap failed");
  return new (p) RankTally[static_cast<std::size_t>(nranks)];
}

void freeTallies(RankTally* tallies, int nranks) {
  ::munmap(tallies, sizeof(RankTally) * static_cast<std::size_t>(nranks));
}

namespace {

// advertise_for: start the proxy in front of the listener, advertise the proxy.
struct ProxyHook {
  chaos::ChaosProxy* proxy;
  std::string endpoint;
  static const char* advertise(const char* listen, void* context) {
    auto* hook = static_cast<ProxyHook*>(context);
    try {
      auto host = chaos::splitHostPort(listen).first;
      hook->proxy->start(listen, (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":0");
      hook->endpoint = hook->proxy->endpoint();
      return hook->endpoint.c_str();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "cannot start the chaos proxy: %s\n", e.what());
      return nullptr;
    }
  }
};

chaos::ChaosOptions chaosFor(std::uint64_t seed, int rank) {
  chaos::ChaosOptions o;
  o.seed = seed * 7919 + static_cast<std::uint64_t>(rank);
  o.shuffleAccepts = true;
  o.shuffleBatch = 4;
  o.shuffleWindowMs = 3;
  o.holdNewConnMs = {0, 20};
  o.fragmentBytes = {1, 48};  // frames are 40 + 64 bytes: every one is cut
  o.delayPiecesUs = {0, 20};
  o.stallProbability = 0.0005;
  o.stallMs = {1, 5};
  return o;
}

void call(int rc, const NvshmemPlugin& plugin, const std::string& what) {
  if (rc != 0) throw std::runtime_error(what + " returned " + std::to_string(rc) + ": " + plugin.lastError());
}

// NVSHMEM's unique-id sequence (join_snippet.hpp, shown in docs/integration.md).
void join(NvshmemPlugin& plugin, bootstrap_handle_t& handle, int rank, int nranks, const UidPipes& pipes) {
  int rc = joinWithPlugin(NvshmemPlugin::path().c_str(), &handle, rank, nranks, [&](unsigned char* uid) {
    if (rank == 0)
      pipes.send(uid);
    else
      pipes.receive(rank, uid, std::chrono::seconds(30));
  });
  call(rc, plugin, "joining through the plug-in");
  expect(handle.pre_init_ops && handle.pre_init_ops->get_unique_id, "pre_init set no get_unique_id");
}

void checkHandle(const bootstrap_handle_t& h, int rank, int nranks) {
  expect(h.version == TETHER_NVSHMEM_ABI_VERSION, "handle version " + std::to_string(h.version));
  expect(h.pg_rank == rank && h.pg_size == nranks, "pg_rank/pg_size");
  // All ranks run on this host.
  expect(h.mype_node == rank && h.npes_node == nranks,
         "mype_node " + std::to_string(h.mype_node) + " npes_node " + std::to_string(h.npes_node));
  expect(h.allgather && h.alltoall && h.barrier && h.global_exit && h.finalize && h.show_info && h.comm_state,
         "init left an operation unset");
}

}  // namespace

void stressRank(int rank, const StressConfig& config, const UidPipes& pipes, RankTally* tallies) {
  const int n = config.nranks;
  NvshmemPlugin plugin;
  auto proxy = std::make_unique<chaos::ChaosProxy>(chaosFor(config.seed, rank));
  ProxyHook hook{proxy.get(), {}};
  tether_options_t options;
  tether_options_init(&options);
  options.timeout_ms = 60000;
  if (config.proxy) {
    options.advertise_for = &ProxyHook::advertise;
    options.advertise_context = &hook;
  }
  call(plugin.setOptions(&options), plugin, "tether_nvshmem_set_options");

  bootstrap_handle_t h{};
  join(plugin, h, rank, n, pipes);
  checkHandle(h, rank, n);
  call(h.show_info(&h, 0), plugin, "show_info");

  // Not in place: each rank's 8 bytes land at recvbuf + rank * 8.
  std::uint64_t mine = 0xA11000 + static_cast<std::uint64_t>(rank);
  std::vector<std::uint64_t> all(static_cast<std::size_t>(n), 0);
  call(h.allgather(&mine, all.data(), sizeof mine, &h), plugin, "allgather");
  for (int r = 0; r < n; ++r)
    expect(all[static_cast<std::size_t>(r)] == 0xA11000u + r, "allgather block " + std::to_string(r));

  // 64-byte records like the queue-pair information runtimes exchange, each
  // naming source, destination and iteration and carrying a checksum
  // (test/stress/payload.hpp), so a record in the wrong slot is counted.
  constexpr std::size_t kRecord = 64;
  auto key = [](int src, int dst, std::uint64_t it) {
    return stress::OpKey{0, static_cast<std::uint32_t>(it), stress::OpKind::Alltoall, 0, src, dst, 0};
  };
  RankTally& tally = tallies[rank];
  std::vector<unsigned char> out(n * kRecord), in(n * kRecord);
  std::string firstSwap;
  for (std::uint64_t it = 0; it < config.iterations; ++it) {
    for (int d = 0; d < n; ++d) stress::fillPayload(&out[d * kRecord], kRecord, key(rank, d, it));
    std::fill(in.begin(), in.end(), 0);
    call(h.alltoall(out.data(), in.data(), kRecord, &h), plugin, "alltoall #" + std::to_string(it));
    for (int s = 0; s < n; ++s) {
      auto why = stress::checkPayload(&in[s * kRecord], kRecord, key(s, rank, it));
      ++tally.records;
      if (why) {
        ++tally.swapped;
        if (firstSwap.empty()) firstSwap = *why;
      }
    }
    call(h.barrier(&h), plugin, "barrier #" + std::to_string(it));
    tally.iterations = it + 1;
  }
  call(h.finalize(&h), plugin, "finalize");
  proxy->stop();
  auto stats = proxy->stats();
  tally.proxyAccepted = stats.accepted;
  tally.proxyPieces = stats.pieces;
  tally.proxyReordered = stats.reorderedBatches;
  expect(tally.swapped == 0, std::to_string(tally.swapped) + " swapped records, first: " + firstSwap);
}

void globalExitRank(int rank, int nranks, int victim, int status, const UidPipes& pipes) {
  NvshmemPlugin plugin;
  tether_options_t options;
  tether_options_init(&options);
  options.timeout_ms = 20000;
  call(plugin.setOptions(&options), plugin, "tether_nvshmem_set_options");
  bootstrap_handle_t h{};
  join(plugin, h, rank, nranks, pipes);
  int rc = h.barrier(&h);
  if (rank == victim) {
    expect(rc == 0, "the victim's first barrier returned " + std::to_string(rc) + ": " + plugin.lastError());
    std::fflush(nullptr);
    h.global_exit(status);  // does not return
  }
  // The victim may leave its first barrier before this rank has finished its
  // own part of it: then that barrier is the one the abort ends.
  if (rc == 0) rc = h.barrier(&h);
  std::string message = plugin.lastError();
  expect(rc == TETHER_ERR_ABORTED, "the barrier returned " + std::to_string(rc) + ": " + message);
  expect(message.find("aborted by rank " + std::to_string(victim)) != std::string::npos &&
             message.find("global_exit(" + std::to_string(status) + ")") != std::string::npos,
         "the abort message names neither the origin nor global_exit: " + message);
  h.finalize(&h);
}

}  // namespace tether::test
