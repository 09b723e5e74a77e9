// Resource errors: the root's port taken, the descriptor limit reached, a
// refused or unreachable root — each a clear tether::Error within the
// deadline, never a hang or a leak; and no descriptor outlives a world.
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include "fault_support.hpp"
#include "multiproc.hpp"
#include "raw_client.hpp"
#include "tether/tcp_bootstrap.hpp"

using namespace tether;
using namespace std::chrono_literals;

namespace {

// A listening socket on 127.0.0.1 (port 0: any), closed on destruction.
struct Listener {
  int fd = -1;
  std::uint16_t port = 0;
  explicit Listener(bool listening = true) {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    if (listening) ::listen(fd, 4);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~Listener() { close(); }
  void close() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

// Runs `body` in a forked child (for setrlimit / unshare that must not touch
// this process); returns its exit code (77: skipped) and its message.
std::pair<int, std::string> inChild(const std::function<std::string()>& body, std::chrono::seconds deadline) {
  int p[2];
  REQUIRE(::pipe(p) == 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(p[0]);
    ::alarm(static_cast<unsigned>(deadline.count()));  // a hang ends as SIGALRM
    std::string msg;
    int code = 0;
    try {
      msg = body();
      if (msg.rfind("SKIP", 0) == 0) code = 77;
    } catch (const std::exception& e) {
      msg = std::string("child failed: ") + e.what();
      code = 1;
    }
    (void)!::write(p[1], msg.data(), msg.size());
    ::_exit(code);
  }
  ::close(p[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(p[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
  ::close(p[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) return {-WTERMSIG(status), out};
  return {WEXITSTATUS(status), out};
}

// Runs ranks 0..n-1 as threads with their own TcpBootstrap, then `body` on
// each; returns one error text per rank ("" = fine).
std::vector<std::string> threadRanks(int n, const UniqueId& id, std::chrono::milliseconds timeout,
                                     const std::function<void(TcpBootstrap&)>& body) {
  std::vector<std::string> errs(n);
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r)
    ts.emplace_back([&, r] {
      try {
        TcpBootstrap b(r, n, id, TcpOptions{timeout, {}, {}, {}});
        body(b);
      } catch (const Error& e) {
        errs[r] = std::string("[") + toString(e.code()) + "] " + e.what();
      } catch (const std::exception& e) {
        errs[r] = std::string("[not a tether::Error] ") + e.what();
      }
    });
  for (auto& t : ts) t.join();
  return errs;
}

void quiet() {
  if (!std::getenv("TETHER_DEBUG")) setLogLevel(LogLevel::None);
}

}  // namespace

TEST_CASE("root port already in use: System error naming the address, at once", "[fault][resources]") {
  quiet();
  Listener taken;
  auto id = TcpBootstrap::createUniqueId("127.0.0.1:" + std::to_string(taken.port));
  auto t0 = std::chrono::steady_clock::now();
  try {
    TcpBootstrap b(0, 2, id, TcpOptions{5s, {}, {}, {}});
    FAIL("rank 0 started on a port in use");
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(e.code() == ErrorCode::System);
    CHECK(std::string(e.what()).find("127.0.0.1:" + std::to_string(taken.port)) != std::string::npos);
    CHECK(std::string(e.what()).find("in use") != std::string::npos);
  }
  CHECK(std::chrono::steady_clock::now() - t0 < 2s);
}

TEST_CASE("refused root: Timeout within the deadline naming the root address, after bounded retries",
          "[fault][resources]") {
  quiet();
  Listener gone(false);  // bound, never listening: connections are refused
  std::string root = "127.0.0.1:" + std::to_string(gone.port);
  auto id = TcpBootstrap::createUniqueId(root);
  const auto timeout = 1500ms;
  auto t0 = std::chrono::steady_clock::now();
  try {
    TcpBootstrap b(1, 2, id, TcpOptions{timeout, {}, {}, {}});
    FAIL("joined a world whose root refuses");
  } catch (const Error& e) {
    std::string what = e.what();
    INFO(what);
    CHECK(e.code() == ErrorCode::Timeout);
    CHECK(what.find(root) != std::string::npos);
    CHECK(what.find("refused") != std::string::npos);
  }
  auto took = std::chrono::steady_clock::now() - t0;
  CHECK(took < timeout + 1s);
  CHECK(took > timeout / 3);  // it did retry, it did not give up at the first refusal
}

TEST_CASE("unreachable root: Timeout within the deadline naming the root address", "[fault][resources]") {
  // In a private network namespace with only loopback up, 192.0.2.1 (TEST-NET-1)
  // has no route: connect() fails with ENETUNREACH and nothing leaves the host.
  auto [code, msg] = inChild(
      [] {
        quiet();
        if (::unshare(CLONE_NEWNET) != 0) return std::string("SKIP: unshare(CLONE_NEWNET) needs root");
        int s = ::socket(AF_INET, SOCK_DGRAM, 0);
        ifreq ifr{};
        std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
        ::ioctl(s, SIOCGIFFLAGS, &ifr);
        ifr.ifr_flags |= IFF_UP;
        if (::ioctl(s, SIOCSIFFLAGS, &ifr) != 0) return std::string("SKIP: cannot bring up lo");
        ::close(s);
        auto id = TcpBootstrap::uniqueIdFromRoot("192.0.2.1:5555");
        TcpOptions o;
        o.timeout = 1500ms;
        o.listenHost = "127.0.0.1";
        auto t0 = std::chrono::steady_clock::now();
        try {
          TcpBootstrap b(1, 2, id, o);
          return std::string("joined a world whose root is unreachable");
        } catch (const Error& e) {
          std::string what = e.what();
          auto took = std::chrono::steady_clock::now() - t0;
          if (e.code() != ErrorCode::Timeout || what.find("192.0.2.1:5555") == std::string::npos ||
              what.find("unreachable") == std::string::npos)
            return "unexpected error: " + what;
          if (took > 2500ms) return "took too long: " + what;
          return std::string("ok");
        }
      },
      30s);
  if (code == 77) {
    WARN(msg);
    return;
  }
  INFO(msg);
  CHECK(code == 0);
  CHECK(msg == "ok");
}

TEST_CASE("descriptor limit reached: a clear error at every point, no hang, no leak", "[fault][resources]") {
  auto [code, msg] = inChild(
      [] {
        quiet();
#ifdef TETHER_TEST_UBSAN
        return std::string(
            "SKIP: UBSan's vptr check needs descriptors of its own (it probes memory through a pipe) "
            "and misreports at the limit; this test runs in the plain and TSan builds");
#endif
        std::string report;
        bool sawLimit = false, sawSuccess = false;
        // Warm-up: process-lifetime descriptors (the RNG's) are opened once.
        auto warm = TcpBootstrap::createUniqueId("127.0.0.1:0");
        threadRanks(2, warm, 5s, [](TcpBootstrap& b) { b.barrier(); });
        const int base = fault::openFdCount();
        for (int extra = 0; extra <= 14; ++extra) {
          auto id = TcpBootstrap::createUniqueId("127.0.0.1:0");  // holds one descriptor
          rlimit old{};
          ::getrlimit(RLIMIT_NOFILE, &old);
          rlimit low = old;
          low.rlim_cur = static_cast<rlim_t>(base + 1 + extra);
          ::setrlimit(RLIMIT_NOFILE, &low);
          auto errs = threadRanks(2, id, 1000ms, [](TcpBootstrap& b) { b.barrier(); });
          ::setrlimit(RLIMIT_NOFILE, &old);
          TcpBootstrap::forgetUniqueId(id);
          bool ok = true;
          for (auto& e : errs) {
            if (e.empty()) continue;
            ok = false;
            if (e.find("[not a tether::Error]") != std::string::npos)
              return "limit " + std::to_string(extra) + ": " + e;
            if (e.find("open files") != std::string::npos) sawLimit = true;
          }
          sawSuccess = sawSuccess || ok;
          report += "extra " + std::to_string(extra) + ": " + (ok ? "ok" : errs[0] + " | " + errs[1]) + "\n";
          int now = fault::openFdCount();
          if (now != base)
            return "descriptor leak after limit +" + std::to_string(extra) + ": " + std::to_string(base) + " -> " +
                   std::to_string(now) + "\n" + report;
        }
        if (!sawLimit) return "never hit the limit:\n" + report;
        if (!sawSuccess) return "never succeeded even with room:\n" + report;
        return "ok\n" + report;
      },
      120s);
  if (code == 77) {
    WARN(msg);
    return;
  }
  INFO(msg);
  CHECK(code == 0);
  CHECK(msg.rfind("ok", 0) == 0);
}

// A host leader that cannot accept its host's ranks (the descriptor limit is
// below what its group needs) until the deadline says so in one line, not one
// per retry (1,407 in 15 s at 32 ranks under `ulimit -n 24`), and the ranks
// still queued at its socket read its cause: before, they took the closed
// socket for a leader gone, bound it again and led group 0 too.
// A rank that arrives once the leader has failed and exited (it may: the
// leader's own dial to the root can fail on the same limit at once; the
// full suite saw rank 10 lead after rank 2 so, once) finds no leader and
// leads group 0 itself, rightly: what must never happen is two leaders at
// once, so the check is that their terms (from "leads group 0" to the
// constructor's end, steady_clock: one clock for every process of the host)
// do not overlap. (A rank queued at the leader's socket that re-leads after
// the leader's close is not told apart from a late one here.)
TEST_CASE("a host leader out of descriptors logs it once, and the ranks it never accepted do not lead its group",
          "[fault][resources]") {
#ifdef TETHER_TEST_UBSAN
  WARN("skipped: UBSan's vptr check needs descriptors of its own and misreports at the limit");
  return;
#endif
  const int n = 16;
  ::setenv("TETHER_HOST_LOCAL", "1", 1);
  for (int round = 0; round < 3; ++round) {  // a queued rank led again in most runs, not all
    auto res = test::runRanks(
        n,
        [&](int rank, const UniqueId& id) {
          static std::atomic<int> leads{0}, failures{0};
          static std::atomic<long long> ledAt{0};
          auto now = [] {
            return static_cast<long long>(std::chrono::duration_cast<std::chrono::microseconds>(
                                              std::chrono::steady_clock::now().time_since_epoch())
                                              .count());
          };
          setLogLevel(LogLevel::Trace);
          setLogHandler([now](LogLevel, const std::string& line) {
            if (line.find("leads group 0 ") != std::string::npos && ++leads == 1) ledAt = now();
            if (line.find("host-local: accept failed") != std::string::npos) ++failures;
          });
          rlimit was{};
          ::getrlimit(RLIMIT_NOFILE, &was);
          rlimit low = was;
          // A leader holds a few of the 15 others. 13, one more than before
          // the progress thread's timer (a descriptor per world since
          // 2026-12-05), keeps the room a leader had: with less, its own dial
          // to the root fails first more often (the case below; 1 of 3 runs
          // at 11 here), and a full suite saw rank 10 lead while rank 1,
          // whose dial had failed so, was still closing.
          low.rlim_cur = fault::roomFor(13);
          ::setrlimit(RLIMIT_NOFILE, &low);
          std::string what = "it completed";
          try {
            TcpBootstrap b(rank, n, id, TcpOptions{2s, {}, {}, {}});
          } catch (const Error& e) {
            what = e.what();
          }
          const long long endedAt = now();
          ::setrlimit(RLIMIT_NOFILE, &was);
          setLogHandler(nullptr);
          throw std::runtime_error("leads " + std::to_string(leads) + ", accept failures logged " +
                                   std::to_string(failures) + ", term " + std::to_string(ledAt) + " " +
                                   std::to_string(endedAt) + ": " + what);
        },
        60s);
    int leaders = 0;
    std::vector<std::pair<long long, long long>> terms;  // each leader's
    INFO("round " << round << ":\n" << test::summary(res));
    for (const auto& r : res) {
      int led = 0, logged = 0;
      long long from = 0, to = 0;
      REQUIRE(std::sscanf(r.output.c_str(), "leads %d, accept failures logged %d, term %lld %lld", &led, &logged,
                          &from, &to) == 4);
      leaders += led;
      CHECK(led <= 1);
      if (led) terms.emplace_back(from, to);
      CHECK(logged <= 1);  // the first; the next after 5 s
    }
    CHECK(leaders >= 1);
    std::sort(terms.begin(), terms.end());
    for (std::size_t i = 1; i < terms.size(); ++i)
      CHECK(terms[i].first > terms[i - 1].second);  // a later leader only once the earlier one has ended
  }
  ::unsetenv("TETHER_HOST_LOCAL");
}

TEST_CASE("no descriptor outlives its worlds: normal, aborted, timed-out and hostile runs", "[fault][resources]") {
  quiet();
  ::setenv("TETHER_HANDSHAKE_TIMEOUT_MS", "500", 1);
  auto warm = TcpBootstrap::createUniqueId("127.0.0.1:0");
  threadRanks(4, warm, 5s, [](TcpBootstrap& b) { b.barrier(); });  // process-lifetime descriptors
  const int before = fault::openFdCount();

  SECTION("four ranks, collectives and point-to-point") {
    auto id = TcpBootstrap::createUniqueId("127.0.0.1:0");
    auto errs = threadRanks(4, id, 10s, [](TcpBootstrap& b) {
      std::vector<int> v(4);
      v[b.rank()] = b.rank();
      b.allgather(v.data(), sizeof(int));
      int x = b.rank();
      b.send(&x, sizeof x, (b.rank() + 1) % 4, 3);
      b.recv(&x, sizeof x, (b.rank() + 3) % 4, 3);
      auto child = b.split(b.rank() % 2, 0);
      child->barrier();
      b.barrier();
    });
    for (auto& e : errs) CHECK(e == "");
  }
  SECTION("an abort in the middle") {
    auto id = TcpBootstrap::createUniqueId("127.0.0.1:0");
    auto errs = threadRanks(4, id, 10s, [](TcpBootstrap& b) {
      b.barrier();
      if (b.rank() == 2) b.abort("leak test");
      for (;;) b.barrier();
    });
    for (auto& e : errs) CHECK(e.find("[Aborted]") == 0);
  }
  SECTION("a rendezvous that times out (one rank missing)") {  // errors: see above
    auto id2 = TcpBootstrap::createUniqueId("127.0.0.1:0");
    std::vector<std::string> e2(3);
    std::vector<std::thread> ts;
    for (int r = 0; r < 3; ++r)
      ts.emplace_back([&, r] {
        try {
          TcpBootstrap b(r, 4, id2, TcpOptions{800ms, {}, {}, {}});
        } catch (const Error& e) {
          // The first rank whose deadline passes times out and tells the
          // others (Aborted) or just closes (PeerLost), maybe a moment before
          // their own deadline.
          bool expected =
              e.code() == ErrorCode::Timeout || e.code() == ErrorCode::PeerLost || e.code() == ErrorCode::Aborted;
          e2[r] = expected ? "Timeout" : std::string(toString(e.code())) + ": " + e.what();
        }
      });
    for (auto& t : ts) t.join();
    for (auto& e : e2) CHECK(e == std::string("Timeout"));
  }
  SECTION("strangers connecting while the world runs") {
    auto id = TcpBootstrap::createUniqueId("127.0.0.1:0");
    std::vector<std::unique_ptr<fault::RawClient>> strangers;
    std::thread knock([&] {
      std::this_thread::sleep_for(50ms);
      for (int i = 0; i < 5; ++i) {
        try {
          strangers.push_back(std::make_unique<fault::RawClient>("127.0.0.1", id.rootPort()));
        } catch (...) {
        }
      }
    });
    auto errs = threadRanks(3, id, 10s, [](TcpBootstrap& b) {
      std::this_thread::sleep_for(100ms);
      b.barrier();
    });
    knock.join();
    strangers.clear();
    for (auto& e : errs) CHECK(e == "");
  }
  INFO("open descriptors before " << before);
  CHECK(fault::openFdCount() == before);
}
