// Host-local aggregation (TETHER_HOST_LOCAL=1, docs/scale.md): every rank gets
// the same table with it on and off; on several "hosts" (network namespaces
// joined by a bridge the test builds; nothing leaves the machine) the root
// receives one registration per host; a host leader killed mid-rendezvous
// makes its host's ranks and the others fail fast, naming it. The namespace
// cases need root: skipped (with a warning) without it.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <dirent.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "base/crypto.hpp"
#include "core/unique_id_layout.hpp"
#include "multiproc.hpp"
#include "proc_stats.hpp"
#include "raw_client.hpp"
#include "rendezvous/host_group.hpp"
#include "rendezvous/rendezvous.hpp"

using namespace tether;
using namespace std::chrono_literals;

namespace {

bool sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0; }

// Every rank sends every other rank its rank: each uses every entry of its table.
void exchange(TcpBootstrap& b) {
  const int n = b.size();
  std::vector<int> out(n, b.rank()), in(n, -1);
  b.alltoall(out.data(), in.data(), sizeof(int));
  for (int r = 0; r < n; ++r) test::expect(in[r] == r, "block " + std::to_string(r) + " from its rank");
}

// exchange(), then an all-gather of 7r + 1 from every rank r.
void collectives(TcpBootstrap& b) {
  exchange(b);
  std::vector<int> all(static_cast<std::size_t>(b.size()), -1);
  all[static_cast<std::size_t>(b.rank())] = 7 * b.rank() + 1;
  b.allgather(all.data(), sizeof(int));
  for (int r = 0; r < b.size(); ++r)
    test::expect(all[static_cast<std::size_t>(r)] == 7 * r + 1, "all-gather entry " + std::to_string(r));
}

// The root's children in the host leaders' tree of `leaders` leaders.
int rootChildren(int leaders, int radix) { return static_cast<int>(rdv::treeChildren(0, leaders + 1, radix).size()); }

void runAt(int n, const char* hostLocal) {
  ::setenv("TETHER_HOST_LOCAL", hostLocal, 1);
  auto res = test::runRanks(n, [&](int rank, const UniqueId& id) {
    TcpBootstrap b(rank, n, id, TcpOptions{60s, {}, {}, {}});
    exchange(b);
    if (rank == 0 && std::string(hostLocal) == "1")
      test::expect(rdv::hostRegistrationsReceived() >= 1, "the root counted host registrations");
    b.barrier();
  });
  ::unsetenv("TETHER_HOST_LOCAL");
  INFO(test::summary(res));
  for (const auto& r : res) CHECK(r.exitCode == 0);
}

// The RLIMIT_NOFILE under which this process can open exactly `more`
// descriptors (the kernel gives the lowest free number; one open above the
// limit, e.g. inherited from the shell, stays usable and takes no place).
rlim_t roomFor(int more) {
  DIR* dir = ::opendir("/proc/self/fd");
  test::expect(dir != nullptr, "/proc/self/fd can be read");
  std::vector<bool> open;
  while (dirent* e = ::readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    const auto fd = static_cast<std::size_t>(std::atoi(e->d_name));
    if (fd >= open.size()) open.resize(fd + 1);
    open[fd] = true;
  }
  ::closedir(dir);
  std::size_t fd = 0;
  for (int free = 0;; ++fd)
    if ((fd >= open.size() || !open[fd]) && ++free == more) break;
  return static_cast<rlim_t>(fd + 1);
}

// `n` ranks of one host in groups of at most `k` (TETHER_HOST_GROUP_MAX),
// `rounds` times; `local`: TETHER_LOCAL_NRANKS ("0": unknown). Each rank's
// rendezvous runs with RLIMIT_NOFILE at what it had open plus what a group
// needs: a leader's k - 1 members, its listener and the connection it answers
// "full"; the root's links from the other groups' leaders; `spare` for the
// loop, the TCP listener and a leader's link to the root. A leader holding
// every rank of the host (n - 1 members) cannot accept them all, so the
// rendezvous would end at its deadline instead.
// A sanitizer's runtime needs descriptors of its own while it checks (UBSan's
// vptr check probes memory through a pipe: out of descriptors it reports
// objects as invalid and halts; seen 1 round in 10 under CI's ASan+UBSan
// build). Under one, the bound is loose: the plain build checks it.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr int kSanitizerRoom = 16;
#else
constexpr int kSanitizerRoom = 0;
#endif

void runGroups(int n, int k, const char* local, int spare, int rounds) {
  const int groups = (n + k - 1) / k;
  ::setenv("TETHER_HOST_LOCAL", "1", 1);
  ::setenv("TETHER_HOST_GROUP_MAX", std::to_string(k).c_str(), 1);
  ::setenv("TETHER_LOCAL_NRANKS", local, 1);
  for (int round = 0; round < rounds; ++round) {
    auto res = test::runRanks(
        n,
        [&](int rank, const UniqueId& id) {
          rlimit was{};
          test::expect(::getrlimit(RLIMIT_NOFILE, &was) == 0, "getrlimit");
          rlimit during = was;
          during.rlim_cur = roomFor(k + 1 + (groups - 1) + spare + kSanitizerRoom);
          test::expect(::setrlimit(RLIMIT_NOFILE, &during) == 0, "setrlimit");
          std::optional<TcpBootstrap> b;
          try {
            b.emplace(rank, n, id, TcpOptions{30s, {}, {}, {}});
          } catch (...) {
            ::setrlimit(RLIMIT_NOFILE, &was);
            throw;
          }
          ::setrlimit(RLIMIT_NOFILE, &was);  // the collectives link every pair
          exchange(*b);
          if (rank == 0 && std::string(local) != "0")
            test::expect(rdv::hostRegistrationsReceived() == groups,
                         "one registration per group: " + std::to_string(groups) + " expected, got " +
                             std::to_string(rdv::hostRegistrationsReceived()));
          b->barrier();
        },
        90s);
    INFO("round " << round << ": " << test::summary(res));
    for (const auto& r : res) REQUIRE(r.exitCode == 0);
  }
  ::unsetenv("TETHER_HOST_LOCAL");
  ::unsetenv("TETHER_HOST_GROUP_MAX");
  ::unsetenv("TETHER_LOCAL_NRANKS");
}

// `n` ranks with host-local aggregation and `env`; `victim` exits 1.5 s
// after `before` (by then registered with its leader): every other rank must
// fail, `check`ing its error, well before the 60 s deadline.
void loseRank(int n, int victim, const std::vector<std::pair<const char*, const char*>>& env,
              const std::function<void(int)>& before, const std::function<void(int, const std::string&)>& check) {
  ::setenv("TETHER_HOST_LOCAL", "1", 1);
  for (const auto& [name, value] : env) ::setenv(name, value, 1);
  const auto began = std::chrono::steady_clock::now();
  auto res = test::runRanks(n, [&](int rank, const UniqueId& id) {
    before(rank);
    if (rank == victim)
      std::thread([] {
        std::this_thread::sleep_for(1500ms);
        ::_exit(3);
      }).detach();
    try {
      TcpBootstrap b(rank, n, id, TcpOptions{60s, {}, {}, {}});
    } catch (const Error& e) {
      return check(rank, e.what());
    }
    test::expect(false, "should have failed");
  });
  const auto took = std::chrono::steady_clock::now() - began;
  ::unsetenv("TETHER_HOST_LOCAL");
  for (const auto& [name, value] : env) ::unsetenv(name);
  INFO(test::summary(res));
  for (const auto& r : res)
    if (r.rank != victim) CHECK(r.exitCode == 0);
  CHECK(took < 20s);  // the deadline is 60 s
}

// The world id of the job of `id`, as the bootstrap computes it.
std::uint64_t worldOf(const UniqueId& id) {
  auto f = uid::parse(id);
  return crypto::hash64("tether-world",
                        std::string_view(reinterpret_cast<const char*>(f.secret.data()), f.secret.size()));
}

// The abstract address of group 0 of this host, for the job of `id`.
std::pair<sockaddr_un, socklen_t> groupZero(const UniqueId& id, int n) {
  std::string name = rdv::groupSocketName(rdv::hostSocketName(uid::parse(id).secret, worldOf(id), n), 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path + 1, name.data() + 1, name.size() - 1);
  return {a, static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size())};
}

// Holds group 0's name first and closes `count` connections without a word
// (a leader gone between accept and its answer), then gives the name up.
void silentHolder(const UniqueId& id, int n, int count) {
  auto [a, len] = groupZero(id, n);
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  test::expect(::bind(fd, reinterpret_cast<sockaddr*>(&a), len) == 0 && ::listen(fd, 64) == 0, "bind group 0");
  for (int i = 0; i < count; ++i) ::close(::accept(fd, nullptr, nullptr));
  ::close(fd);
}

// A process that knows the host's socket name but not the secret: it
// answers the leader's challenge with a wrong proof; returns what came back
// ("reject: <reason>") or why nothing did.
std::string stranger(const UniqueId& id, int n) {
  auto [a, len] = groupZero(id, n);
  const std::uint64_t world = worldOf(id);
  int fd = -1;
  for (int i = 0; i < 500; ++i) {  // until a leader listens
    fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), len) == 0) break;
    ::close(fd);
    fd = -1;
    std::this_thread::sleep_for(10ms);
  }
  if (fd < 0) return "no leader";
  auto readMsg = [&](std::vector<unsigned char>& body) {
    unsigned char head[5];
    if (::recv(fd, head, 5, MSG_WAITALL) != 5) return -1;
    std::uint32_t l = head[0] | head[1] << 8 | head[2] << 16 | static_cast<std::uint32_t>(head[3]) << 24;
    body.resize(l - 1);
    if (l > 1 && ::recv(fd, body.data(), l - 1, MSG_WAITALL) != static_cast<ssize_t>(l - 1)) return -1;
    return static_cast<int>(head[4]);
  };
  std::vector<unsigned char> body;
  if (readMsg(body) != 1) return "no challenge";
  wire::Hello h{7, static_cast<std::uint32_t>(n), world, 0, {}, {}};  // claims rank 7, proof all zero
  auto hello = wire::encode(h);
  auto l = static_cast<std::uint32_t>(hello.size() + 1);
  unsigned char head[5] = {static_cast<unsigned char>(l), static_cast<unsigned char>(l >> 8), 0, 0, 2};
  (void)!::write(fd, head, 5);
  (void)!::write(fd, hello.data(), hello.size());
  int type = readMsg(body);
  ::close(fd);
  if (type != 4) return "answer of type " + std::to_string(type);
  return "reject: " + wire::decodeReject(body).reason;
}

// Runs `body` in a forked child that may enter namespaces; 77: skipped.
int inChild(const std::function<int()>& body, std::string& text) {
  int out[2];
  if (::pipe(out) != 0) return 1;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::close(out[0]);
    int code = 1;
    try {
      code = body();
    } catch (const std::exception& e) {
      std::printf("harness failed: %s\n", e.what());
    }
    std::fflush(stdout);
    ::_exit(code);
  }
  ::close(out[1]);
  char buf[4096];
  ssize_t got;
  while ((got = ::read(out[0], buf, sizeof buf)) > 0) text.append(buf, static_cast<std::size_t>(got));
  ::close(out[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

// Hosts 1..hosts-1 are namespaces held by a sleeping process each, joined to
// this (new) namespace by veth pairs on one bridge: 10.201.0.1 here, 10.201.0.(h+1) there.
struct Hosts {
  std::vector<pid_t> holders;
  bool ok = false;
  explicit Hosts(int hosts) {
    if (::unshare(CLONE_NEWNET) != 0) return;
    if (!sh("ip link set lo up") || !sh("ip link add tvbr type bridge") || !sh("ip addr add 10.201.0.1/24 dev tvbr") ||
        !sh("ip link set tvbr up"))
      return;
    for (int h = 1; h < hosts; ++h) {
      int ready[2];
      if (::pipe(ready) != 0) return;
      pid_t p = ::fork();
      if (p == 0) {
        if (::unshare(CLONE_NEWNET) != 0) ::_exit(1);
        (void)!::write(ready[1], "x", 1);
        for (;;) ::pause();
      }
      char c;
      if (::read(ready[0], &c, 1) != 1) return;
      holders.push_back(p);
      std::string far = "nsenter --net=/proc/" + std::to_string(p) + "/ns/net ";
      std::string a = "tvp" + std::to_string(h), b = "tvh" + std::to_string(h);
      if (!sh("ip link add " + a + " type veth peer name " + b + " netns " + std::to_string(p)) ||
          !sh("ip link set " + a + " master tvbr") || !sh("ip link set " + a + " up") ||
          !sh(far + "ip link set lo up") ||
          !sh(far + "ip addr add 10.201.0." + std::to_string(h + 1) + "/24 dev " + b) ||
          !sh(far + "ip link set " + b + " up"))
        return;
    }
    ok = true;
  }
  ~Hosts() {
    for (pid_t p : holders) {
      ::kill(p, SIGKILL);
      ::waitpid(p, nullptr, 0);
    }
  }
  // Sets the variables for aggregation on these hosts; false (SKIP printed)
  // when the namespaces could not be built.
  bool prepare(int perHost) const {
    if (!ok) {
      std::printf("SKIP: cannot build network namespaces (needs root, ip, nsenter)\n");
      return false;
    }
    ::setenv("TETHER_HOST_LOCAL", "1", 1);
    ::setenv("TETHER_LOCAL_NRANKS", std::to_string(perHost).c_str(), 1);
    ::setenv("TETHER_SOCKET_IFNAME", "tv", 1);
    return true;
  }
  // Moves this process to host h (0: stays).
  void enter(int h) const {
    if (h == 0) return;
    int fd = ::open(("/proc/" + std::to_string(holders[h - 1]) + "/ns/net").c_str(), O_RDONLY);
    test::expect(fd >= 0 && ::setns(fd, CLONE_NEWNET) == 0, "enter host " + std::to_string(h));
    ::close(fd);
  }
};

void expectSkippedOrPassed(int code, const std::string& text) {
  std::printf("%s", text.c_str());
  if (code == 77) {
    WARN(text);
    return;
  }
  INFO(text);
  CHECK(code == 0);
}

}  // namespace

TEST_CASE("every rank gets the same table with host-local aggregation on and off", "[multiproc][host-local]") {
  for (int n : {8, 24, 64}) {
    SECTION("off, " + std::to_string(n) + " ranks") { runAt(n, "0"); }
    SECTION("on, " + std::to_string(n) + " ranks") { runAt(n, "1"); }
  }
}

TEST_CASE("a stranger on the host's socket is refused and never merged", "[multiproc][host-local]") {
  const int n = 4;
  ::setenv("TETHER_HOST_LOCAL", "1", 1);
  auto res = test::runRanks(n, [&](int rank, const UniqueId& id) {
    if (rank == 3) {  // before it joins: the job waits for it
      std::string got = stranger(id, n);
      test::expect(got.find("reject: a process claiming rank 7 does not know this job's secret") == 0,
                   "the stranger is refused: " + got);
    }
    TcpBootstrap b(rank, n, id, TcpOptions{60s, {}, {}, {}});
    exchange(b);
  });
  ::unsetenv("TETHER_HOST_LOCAL");
  INFO(test::summary(res));
  for (const auto& r : res) CHECK(r.exitCode == 0);
}

TEST_CASE("a rank whose connection to a group is closed before any answer tries again", "[multiproc][host-local]") {
  // Rank 3 holds group 0's name before the others start and closes their
  // first 5 connections unanswered: they retry, bind or join, and complete.
  const int n = 4;
  ::setenv("TETHER_HOST_LOCAL", "1", 1);
  auto res = test::runRanks(n, [&](int rank, const UniqueId& id) {
    if (rank == 3)
      silentHolder(id, n, 5);
    else
      std::this_thread::sleep_for(300ms);
    TcpBootstrap b(rank, n, id, TcpOptions{60s, {}, {}, {}});
    exchange(b);
  });
  ::unsetenv("TETHER_HOST_LOCAL");
  INFO(test::summary(res));
  for (const auto& r : res) CHECK(r.exitCode == 0);
}

TEST_CASE("a rank lost before its host's table is out fails its host and the job fast, naming it",
          "[multiproc][host-local]") {
  // One more than come: the leader holds the host's registration.
  loseRank(
      6, 5, {{"TETHER_LOCAL_NRANKS", "7"}},
      [](int rank) {
        if (rank == 5) std::this_thread::sleep_for(500ms);  // a member, not the leader
      },
      [](int, const std::string& what) {
        test::expect(
            what.find("rank 5") != std::string::npos || what.find("host leader of group 0 (rank") != std::string::npos,
            "names the lost rank or this host's leader: " + what);
      });
}

// A member that gives up at its own deadline is not a lost rank: it says why
// before it closes, and its leader reports what it was waiting for (here the
// root, which never comes), naming the member only as the one that timed out.
// Found as 1 run in 2 of errors' "another world size" case under ASan in CI:
// the leader blamed the bystander whose 3 s deadline passed first.
TEST_CASE("a member that times out first: its leader reports the timeout and its own wait, not a lost member",
          "[multiproc][host-local]") {
  const int n = 3;
  ::setenv("TETHER_HOST_LOCAL", "1", 1);
  ::unsetenv("TETHER_LOCAL_NRANKS");
  for (int round = 0; round < 3; ++round) {
    auto res = test::runRanks(n, [&](int rank, const UniqueId& id) {
      if (rank == 0) return;                              // the root never comes
      if (rank == 2) std::this_thread::sleep_for(500ms);  // rank 1 binds the group first
      const auto timeout = rank == 2 ? 1000ms : 20000ms;  // the member gives up first
      try {
        TcpBootstrap b(rank, n, id, TcpOptions{timeout, {}, {}, {}});
      } catch (const Error& e) {
        const std::string what = e.what();
        std::printf("rank %d: %s\n", rank, what.c_str());
        std::fflush(stdout);
        test::expect(e.code() == ErrorCode::Timeout,
                     "rank " + std::to_string(rank) + ": Timeout, not " + toString(e.code()) + ": " + what);
        if (rank == 1) {
          test::expect(what.find("lost rank 2") == std::string::npos, "no lost member: " + what);
          test::expect(what.find("rank 2 of this host") != std::string::npos,
                       "names the member that timed out: " + what);
          test::expect(what.find("the root") != std::string::npos, "says it waits for the root: " + what);
        }
        return;
      }
      test::expect(false, "rank " + std::to_string(rank) + " joined a world without its root");
    });
    INFO(test::summary(res));
    for (const auto& r : res) CHECK(r.exitCode == 0);
  }
  ::unsetenv("TETHER_HOST_LOCAL");
}

// TETHER_LOCAL_NRANKS unset: the launcher's local size is used (here one
// more than come, so the host's leader waits for it and says so at the deadline).
TEST_CASE("without TETHER_LOCAL_NRANKS a host leader expects the launcher's LOCAL_WORLD_SIZE ranks",
          "[multiproc][host-local]") {
  const int n = 2;
  ::setenv("TETHER_HOST_LOCAL", "1", 1);
  ::unsetenv("TETHER_LOCAL_NRANKS");
  ::setenv("LOCAL_WORLD_SIZE", "3", 1);
  auto res = test::runRanks(n, [&](int rank, const UniqueId& id) {
    try {
      TcpBootstrap b(rank, n, id, TcpOptions{3s, {}, {}, {}});
    } catch (const Error& e) {
      const std::string what = e.what();
      // Whichever rank bound the host's socket first leads (either may): the
      // leader names the launcher's local size, the other rank names its leader.
      test::expect(what.find("3 expected (TETHER_LOCAL_NRANKS)") != std::string::npos ||
                       what.find("registered with the host leader") != std::string::npos,
                   "the leader names the launcher's local size, the member its leader: " + what);
      return;
    }
    test::expect(false, "should have waited for a third rank on this host");
  });
  ::unsetenv("TETHER_HOST_LOCAL");
  ::unsetenv("LOCAL_WORLD_SIZE");
  INFO(test::summary(res));
  for (const auto& r : res) CHECK(r.exitCode == 0);
}

TEST_CASE("with host-local aggregation the root receives one registration per host", "[multiproc][host-local]") {
  std::string text;
  int code = inChild(
      [] {
        const int hosts = 3, perHost = 3, n = hosts * perHost;
        Hosts h(hosts);
        if (!h.prepare(perHost)) return 77;
        auto res = test::runRanks(
            n,
            [&](int rank, const UniqueId& id) {
              h.enter(rank % hosts);
              TcpBootstrap b(rank, n, id, TcpOptions{60s, {}, {}, {}});
              exchange(b);
              if (rank == 0)
                test::expect(rdv::hostRegistrationsReceived() == hosts,
                             "one registration per host, got " + std::to_string(rdv::hostRegistrationsReceived()));
              b.barrier();
            },
            90s, "10.201.0.1:0");
        std::string failures;
        for (const auto& r : res)
          if (r.exitCode != 0) failures += test::summary({r});
        std::printf("%s", failures.c_str());
        return failures.empty() ? 0 : 1;
      },
      text);
  expectSkippedOrPassed(code, text);
}

TEST_CASE("a host leader killed mid-rendezvous: every rank fails fast, its host's ranks naming it",
          "[multiproc][host-local]") {
  std::string text;
  int code = inChild(
      [] {
        const int hosts = 3, perHost = 3, n = hosts * perHost, leader = 1;  // host 1: ranks 1, 4, 7
        Hosts h(hosts);
        if (!h.prepare(perHost)) return 77;
        const auto began = std::chrono::steady_clock::now();
        auto res = test::runRanks(
            n,
            [&](int rank, const UniqueId& id) {
              h.enter(rank % hosts);
              if (rank % hosts == 1 && rank != leader) std::this_thread::sleep_for(500ms);  // rank 1 binds first
              // Host 2 is not complete when the leader dies: rank 8 comes late
              // (and gives up after 5 s: the root is gone by then).
              auto timeout = 60s;
              if (rank == 8) std::this_thread::sleep_for(5s), timeout = 5s;
              if (rank == leader)
                std::thread([] {
                  std::this_thread::sleep_for(2s);  // its host registered; the rendezvous still waits for host 2
                  ::_exit(3);
                }).detach();
              try {
                TcpBootstrap b(rank, n, id, TcpOptions{timeout, {}, {}, {}});
              } catch (const Error& e) {
                std::string what = e.what();
                if (rank % hosts == 1)
                  test::expect(what.find("rank " + std::to_string(leader)) != std::string::npos,
                               "names the leader: " + what);
                std::printf("rank %d: %s\n", rank, what.c_str());
                std::fflush(stdout);
                return;
              }
              test::expect(false, "rank " + std::to_string(rank) + " should have failed");
            },
            90s, "10.201.0.1:0");
        const auto took = std::chrono::steady_clock::now() - began;
        std::string failures;
        for (const auto& r : res)
          if (r.rank != leader && r.exitCode != 0) failures += test::summary({r});
        std::printf("%s", failures.c_str());
        std::printf("every rank ended after %lld ms (deadline 60000)\n",
                    static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
        if (took > 30s) return 1;
        return failures.empty() ? 0 : 1;
      },
      text);
  expectSkippedOrPassed(code, text);
}

TEST_CASE("a host's ranks meet in groups of at most TETHER_HOST_GROUP_MAX, one registration per group",
          "[multiproc][host-local]") {
  // 33 ranks in groups of 4: 9 groups; ten rounds each, to catch a race
  // between a full group's answer and a rank's connection in its backlog.
  SECTION("TETHER_LOCAL_NRANKS known: each rank starts at its own group") { runGroups(33, 4, "33", 8, 10); }
  SECTION("TETHER_LOCAL_NRANKS unknown: full groups send ranks on") { runGroups(33, 4, "0", 8, 10); }
}

TEST_CASE("a rank lost in a host's second group fails its group and the job fast, naming it",
          "[multiproc][host-local]") {
  // Groups of 4 of 13 (ranks 0-3, 4-7, 8-11, 12) but 11 ranks come: group 2
  // waits for a fourth, so the rendezvous is still open when rank 6, a member
  // of group 1 (rank 4 binds first), is lost after its group registered.
  loseRank(
      11, 6, {{"TETHER_HOST_GROUP_MAX", "4"}, {"TETHER_LOCAL_NRANKS", "13"}},
      [](int rank) {
        if (rank > 4 && rank < 8) std::this_thread::sleep_for(500ms);
      },
      [](int rank, const std::string& what) {
        std::printf("rank %d: %s\n", rank, what.c_str());
        std::fflush(stdout);
        test::expect(what.find("rank 6") != std::string::npos, "names the lost rank: " + what);
        if (rank >= 4 && rank < 8)
          test::expect(what.find("the host leader of group 1") != std::string::npos, "names its group: " + what);
      });
}

// 16 ranks of one host in groups of 2 with TETHER_RENDEZVOUS_TREE_RADIX=2,
// ten times: 8 groups, so the leaders' tree is 3 or 4 deep.
TEST_CASE("the table goes down a tree of host leaders: the root sends it to its children only",
          "[multiproc][host-local]") {
  const int n = 16, k = 2, radix = 2, groups = n / k;
  ::setenv("TETHER_HOST_LOCAL", "1", 1);
  ::setenv("TETHER_HOST_GROUP_MAX", std::to_string(k).c_str(), 1);
  ::setenv("TETHER_LOCAL_NRANKS", std::to_string(n).c_str(), 1);
  ::setenv("TETHER_RENDEZVOUS_TREE_RADIX", std::to_string(radix).c_str(), 1);
  for (int round = 0; round < 10; ++round) {  // a parent's dial, a child's answer, acknowledgements and goodbyes race
    auto res = test::runRanks(
        n,
        [&](int rank, const UniqueId& id) {
          TcpBootstrap b(rank, n, id, TcpOptions{60s, {}, {}, {}});
          collectives(b);
          if (rank == 0) {
            // Rank 0 leads its group (then all 8 groups register, 7 of them
            // from other leaders) or is a member of one (8 leaders).
            const int sent = rdv::tablesSentByRoot(), registrations = rdv::hostRegistrationsReceived();
            test::expect(registrations == groups, "one registration per group, got " + std::to_string(registrations));
            test::expect(sent == rootChildren(groups - 1, radix) || sent == rootChildren(groups, radix),
                         "the root sent " + std::to_string(sent) + " tables for " + std::to_string(groups) +
                             " groups: one per child in the leaders' tree (3 or 4), not one per leader");
          }
          b.barrier();
        },
        90s);
    INFO("round " << round << ": " << test::summary(res));
    for (const auto& r : res) REQUIRE(r.exitCode == 0);
  }
  for (const char* v :
       {"TETHER_HOST_LOCAL", "TETHER_HOST_GROUP_MAX", "TETHER_LOCAL_NRANKS", "TETHER_RENDEZVOUS_TREE_RADIX"})
    ::unsetenv(v);
}

TEST_CASE("the root closes its registration links to the host leaders once every leader has the table",
          "[multiproc][host-local]") {
  // 8 groups of 2: the root holds a link to each other group's leader while
  // the table goes down; kept, they would be one socket per host group at the
  // root for the job's life (12,287 at 98,304 ranks in 8-rank hosts).
  const int n = 16, k = 2;
  ::setenv("TETHER_HOST_LOCAL", "1", 1);
  ::setenv("TETHER_HOST_GROUP_MAX", std::to_string(k).c_str(), 1);
  ::setenv("TETHER_LOCAL_NRANKS", std::to_string(n).c_str(), 1);
  // The other ranks wait for the root's count before their barrier dials it.
  auto* counted = static_cast<std::atomic<int>*>(
      ::mmap(nullptr, sizeof(std::atomic<int>), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  REQUIRE(counted != MAP_FAILED);
  for (int round = 0; round < 3; ++round) {
    counted->store(0);
    auto res = test::runRanks(
        n,
        [&](int rank, const UniqueId& id) {
          TcpBootstrap b(rank, n, id, TcpOptions{60s, {}, {}, {}});
          if (rank != 0)
            while (counted->load() == 0) std::this_thread::sleep_for(1ms);
          if (rank == 0) {
            // The idle goodbyes take a round trip each: wait for them, with
            // a deadline far above it (a loaded machine).
            long now = test::openSockets();
            const auto until = std::chrono::steady_clock::now() + 20s;
            while (now > 3 && std::chrono::steady_clock::now() < until) {
              std::this_thread::sleep_for(10ms);
              now = test::openSockets();
            }
            counted->store(1);
            test::expect(now >= 0 && now <= 3, "the root still holds " + std::to_string(now) +
                                                   " sockets after the rendezvous (its listener and at most 2 more)");
          }
          b.barrier();
        },
        90s);
    INFO("round " << round << ": " << test::summary(res));
    for (const auto& r : res) REQUIRE(r.exitCode == 0);
  }
  ::munmap(counted, sizeof(std::atomic<int>));
  for (const char* v : {"TETHER_HOST_LOCAL", "TETHER_HOST_GROUP_MAX", "TETHER_LOCAL_NRANKS"}) ::unsetenv(v);
}

TEST_CASE("on four hosts the table goes down a two-level tree of host leaders", "[multiproc][host-local]") {
  std::string text;
  int code = inChild(
      [] {
        // Hosts 0-3 (rank % 4), two ranks each; rank 0 leads host 0 (rank 4
        // comes later), so the leaders are one per other host: tree
        // positions 1-3 under the root; radix 2: the root's children are
        // positions 1 and 2, position 3 is below position 2.
        const int hosts = 4, perHost = 2, n = hosts * perHost, radix = 2;
        Hosts h(hosts);
        if (!h.prepare(perHost)) return 77;
        ::setenv("TETHER_RENDEZVOUS_TREE_RADIX", std::to_string(radix).c_str(), 1);
        std::string failures;
        for (int round = 0; round < 10; ++round) {
          auto res = test::runRanks(
              n,
              [&](int rank, const UniqueId& id) {
                h.enter(rank % hosts);
                if (rank == 4) std::this_thread::sleep_for(500ms);  // rank 0 binds host 0's socket first
                TcpBootstrap b(rank, n, id, TcpOptions{60s, {}, {}, {}});
                collectives(b);
                if (rank == 0) {
                  test::expect(rdv::hostRegistrationsReceived() == hosts,
                               "one registration per host, got " + std::to_string(rdv::hostRegistrationsReceived()));
                  test::expect(rdv::tablesSentByRoot() == rootChildren(hosts - 1, radix),
                               "the root sent the table to its 2 children in the leaders' tree, not to all 3 "
                               "leaders: " +
                                   std::to_string(rdv::tablesSentByRoot()) + " sent");
                }
                b.barrier();
              },
              90s, "10.201.0.1:0");
          for (const auto& r : res)
            if (r.exitCode != 0) failures += "round " + std::to_string(round) + ": " + test::summary({r});
        }
        std::printf("%s", failures.c_str());
        return failures.empty() ? 0 : 1;
      },
      text);
  expectSkippedOrPassed(code, text);
}

namespace {

// Rank `rank` as the only rank of its host, played by hand: it proves the
// secret to the root at `root`, registers its group of one at `self`, port 9
// (where nobody listens) and hangs up (a reset) as soon as a frame comes: a
// table it never forwards, or an abort. Returns the first frame's kind, or
// why none came.
std::string handPlayedLeader(const UniqueId& id, int n, int rank, const std::string& root, const std::string& self) {
  auto f = uid::parse(id);
  const auto world =
      crypto::hash64("tether-world", std::string_view(reinterpret_cast<const char*>(f.secret.data()), f.secret.size()));
  std::optional<fault::RawClient> c;
  for (int i = 0; i < 500 && !c; ++i) {  // until the root listens
    try {
      c.emplace(root, id.rootPort());
    } catch (const std::exception&) {
      std::this_thread::sleep_for(10ms);
    }
  }
  if (!c) return "could not reach the root";
  auto challenge = c->readFrame(10s);
  if (!challenge || challenge->first.kind != wire::Kind::Challenge) return "no challenge";
  wire::Hello h;
  h.rank = static_cast<std::uint32_t>(rank);
  h.nranks = static_cast<std::uint32_t>(n);
  h.world = world;
  crypto::randomBytes(h.nonce.data(), h.nonce.size());
  h.proof = wire::helloProof(f.secret, wire::decodeChallenge(challenge->second), h);
  c->send(fault::frameBytes(wire::Kind::Hello, wire::encode(h)));
  auto welcome = c->readFrame(10s);
  if (!welcome || welcome->first.kind != wire::Kind::Welcome) return "no welcome";
  wire::Register r;
  r.rank = static_cast<std::uint32_t>(rank);
  r.address.family = 4;
  ::inet_pton(AF_INET, self.c_str(), r.address.addr.data());
  r.address.port = 9;
  r.address.hostId = 0x7e57;
  c->send(fault::frameBytes(wire::Kind::Register, wire::encode(r)));
  auto header = c->read(wire::kHeaderBytes, 60s);
  if (!header) return "no table";
  auto kind = wire::decodeHeader(header->data(), ~0ULL, nullptr);
  c->reset();
  return kind ? wire::kindName(kind->kind) : "a malformed frame";
}

// One run on four hosts of one rank each, radix 2 (the root's children are
// ranks 1 and 2, rank 3 is below rank 2), rank `played` played by hand
// (handPlayedLeader, its first frame must be `frame`), rank `hurried` with a
// 3 s deadline (the others 30 s): every real rank must fail (rank 1, done, in
// its barrier), ranks 0 and `named` in the rendezvous with `text` in the
// error. Returns the failures and sets how long it took.
std::string treeFailure(const Hosts& h, int played, const std::string& frame, int hurried, int named,
                        const std::string& text, std::chrono::steady_clock::duration& took) {
  const int n = 4;
  ::setenv("TETHER_RENDEZVOUS_TREE_RADIX", "2", 1);
  const auto began = std::chrono::steady_clock::now();
  auto res = test::runRanks(
      n,
      [&](int rank, const UniqueId& id) {
        h.enter(rank);
        if (rank == played) {
          std::string got = handPlayedLeader(id, n, rank, "10.201.0.1", "10.201.0." + std::to_string(rank + 1));
          test::expect(got == frame, "rank " + std::to_string(rank) + " first gets a " + frame + " frame: " + got);
          return;
        }
        std::optional<TcpBootstrap> b;
        try {
          b.emplace(rank, n, id, TcpOptions{rank == hurried ? 3s : 30s, {}, {}, {}});
          b->barrier();
        } catch (const Error& e) {
          std::string what = e.what();
          std::printf("rank %d: %s\n", rank, what.c_str());
          std::fflush(stdout);
          if (rank == 0 || rank == named)
            test::expect(!b && what.find(text) != std::string::npos,
                         "the rendezvous fails with: " + text + ": " + what);
          return;
        }
        test::expect(false, "rank " + std::to_string(rank) + " should have failed");
      },
      90s, "10.201.0.1:0");
  took = std::chrono::steady_clock::now() - began;
  std::string failures;
  for (const auto& r : res)
    if (r.exitCode != 0) failures += test::summary({r});
  std::printf("every rank ended after %lld ms\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
  std::fflush(stdout);  // the next run's ranks are forked from here
  return failures;
}

}  // namespace

TEST_CASE("a host leader lost before it forwards the table: the ranks below it fail fast, naming it",
          "[multiproc][host-local]") {
  std::string text;
  int code = inChild(
      [] {
        // Rank 2 dies when its table arrives; rank 3, below it, holds only its
        // registration link to the root: the root's abort must reach it,
        // well before the 30 s deadline.
        Hosts h(4);
        if (!h.prepare(1)) return 77;
        std::string failures;
        for (int round = 0; round < 10; ++round) {
          std::chrono::steady_clock::duration took{};
          std::string f = treeFailure(h, 2, "table", -1, 3, "lost rank 2 (the host leader of ranks 2)", took);
          if (took > 15s) f += "it took longer than 15 s\n";
          if (!f.empty()) failures += "round " + std::to_string(round) + ": " + f;
        }
        std::printf("%s", failures.c_str());
        return failures.empty() ? 0 : 1;
      },
      text);
  expectSkippedOrPassed(code, text);
}

TEST_CASE("a host leader that cannot reach its child in the leaders' tree fails naming it, and the job with it",
          "[multiproc][host-local]") {
  std::string text;
  int code = inChild(
      [] {
        // Rank 3 (below rank 2) listens nowhere: rank 2's dials are refused
        // until its 3 s deadline, and its failure reaches the root, whose
        // abort reaches rank 3.
        Hosts h(4);
        if (!h.prepare(1)) return 77;
        std::chrono::steady_clock::duration took{};
        std::string failures = treeFailure(h, 3, "abort", 2, 2, "child host leaders 3 (not reached: ", took);
        if (took > 15s) failures += "it took longer than 15 s (rank 2's deadline 3 s)\n";
        std::printf("%s", failures.c_str());
        return failures.empty() ? 0 : 1;
      },
      text);
  expectSkippedOrPassed(code, text);
}
