// The plug-in's get_unique_id as runtimes call it: DeepEP passes an id it
// never initialised (NVSHMEM's own UID plug-in writes all 128 bytes), and a
// process may make an id it never uses, whose reserved port must not outlive
// finalize.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "multiproc.hpp"
#include "plugin_loader.hpp"
#include "plugin_ranks.hpp"
#include "proc_stats.hpp"
#include "tether/unique_id.hpp"

using namespace tether::test;

namespace {

// The tether id inside an NVSHMEM id (the plug-in keeps bytes 4..127).
tether::UniqueId tetherIdOf(const unsigned char* uid) {
  tether::UniqueId id;
  std::memcpy(id.bytes.data(), "TUID", 4);
  std::memcpy(id.bytes.data() + 4, uid + 4, tether::UniqueId::kBytes - 4);
  return id;
}

// Whether a fresh socket can bind host:port (no SO_REUSEADDR: a listener there refuses it).
bool portFree(const tether::UniqueId& id) {
  const std::string host = id.rootHost();
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (host.find(':') == std::string::npos) {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_port = htons(id.rootPort());
    ::inet_pton(AF_INET, host.c_str(), &a->sin_addr);
    len = sizeof *a;
  } else {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(id.rootPort());
    ::inet_pton(AF_INET6, host.c_str(), &a->sin6_addr);
    len = sizeof *a;
  }
  int fd = ::socket(ss.ss_family, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) == 0;
  ::close(fd);
  return ok;
}

// Sockets this process has open.
int socketsOpen() {
  const long n = tether::test::openSockets();
  REQUIRE(n >= 0);
  return static_cast<int>(n);
}

// DeepEP's sequence: `nvshmemx_uniqueid_t id; nvshmemx_get_uniqueid(&id);`
// on rank 0, the id to every rank, init.
void garbageIdRank(int rank, int nranks, const UidPipes& pipes) {
  NvshmemPlugin plugin;
  bootstrap_handle_t h{};
  expect(plugin.preInit(&h, TETHER_NVSHMEM_ABI_VERSION) == 0, "pre_init");
  unsigned char uid[TETHER_NVSHMEM_UID_BYTES];
  std::memset(uid, 0xA5 + rank, sizeof uid);  // whatever the stack held
  if (rank == 0) {
    int rc = h.pre_init_ops->get_unique_id(uid);
    expect(rc == 0, "get_unique_id of an uninitialised id returned " + std::to_string(rc) + ": " + plugin.lastError());
    pipes.send(uid);
  } else {
    pipes.receive(rank, uid, std::chrono::seconds(30));
  }
  bootstrap_uid_args_t args{(1 << 16) + static_cast<int>(sizeof(bootstrap_uid_args_t)), uid, rank, nranks};
  int rc = plugin.init(&args, &h, TETHER_NVSHMEM_ABI_VERSION);
  expect(rc == 0, "init returned " + std::to_string(rc) + ": " + plugin.lastError());
  expect(h.barrier(&h) == 0, std::string("barrier: ") + plugin.lastError());
  expect(h.finalize(&h) == 0, std::string("finalize: ") + plugin.lastError());
}

}  // namespace

TEST_CASE("get_unique_id writes the whole id into a buffer its caller never initialised, as DeepEP calls it",
          "[nvshmem][nvshmem-plugin]") {
  NvshmemPlugin plugin;
  bootstrap_handle_t handle{};
  REQUIRE(plugin.preInit(&handle, TETHER_NVSHMEM_ABI_VERSION) == 0);
  unsigned char uid[TETHER_NVSHMEM_UID_BYTES];
  std::memset(uid, 0xA5, sizeof uid);
  INFO(plugin.lastError());
  REQUIRE(handle.pre_init_ops->get_unique_id(uid) == 0);
  int version = 0;
  std::memcpy(&version, uid, sizeof version);
  CHECK(version == TETHER_NVSHMEM_UID_VERSION);
  bootstrap_uid_args_t args{(1 << 16) + static_cast<int>(sizeof(bootstrap_uid_args_t)), uid, 0, 1};
  REQUIRE(plugin.init(&args, &handle, TETHER_NVSHMEM_ABI_VERSION) == 0);
  CHECK(handle.barrier(&handle) == 0);
  CHECK(handle.finalize(&handle) == 0);
}

TEST_CASE("every rank joins with an id rank 0 made from an uninitialised buffer (DeepEP's sequence, 4 ranks)",
          "[nvshmem][nvshmem-plugin]") {
  const int nranks = 4;
  UidPipes pipes(nranks);
  std::fflush(nullptr);
  auto results = runRanks(
      nranks, [&](int rank, const tether::UniqueId&) { garbageIdRank(rank, nranks, pipes); }, std::chrono::seconds(60));
  INFO(summary(results));
  CHECK(allOk(results));
}

TEST_CASE("a second, unused get_unique_id leaves no port and no socket open after finalize",
          "[nvshmem][nvshmem-plugin]") {
  NvshmemPlugin plugin;
  const int socketsBefore = socketsOpen();
  bootstrap_handle_t handle{};
  REQUIRE(plugin.preInit(&handle, TETHER_NVSHMEM_ABI_VERSION) == 0);
  NvshmemUid unused, used;
  REQUIRE(handle.pre_init_ops->get_unique_id(unused.bytes) == 0);
  REQUIRE(handle.pre_init_ops->get_unique_id(used.bytes) == 0);
  const auto unusedId = tetherIdOf(unused.bytes), usedId = tetherIdOf(used.bytes);
  CHECK_FALSE(portFree(unusedId));  // both are reserved until an init adopts them
  CHECK_FALSE(portFree(usedId));
  auto args = uidArgs(used, 0, 1);
  REQUIRE(plugin.init(&args, &handle, TETHER_NVSHMEM_ABI_VERSION) == 0);
  REQUIRE(handle.finalize(&handle) == 0);
  CHECK(portFree(unusedId));
  CHECK(portFree(usedId));
  CHECK(socketsOpen() == socketsBefore);
}
