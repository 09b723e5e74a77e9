// Shared by the host-local tests (host_local_test.cpp: groups and failures;
// host_local_tree_test.cpp: the table down the leaders' tree): a shell
// command, the collectives every rank checks, the root's children in the
// leaders' tree, and "hosts" made
// of network namespaces on one bridge (needs root: skipped without it).
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "multiproc.hpp"
#include "rendezvous/rendezvous.hpp"

namespace hostlocal {

using namespace tether;
using test::inChild;

// A deadline, host groups of at most `groupMax` ranks (0: 64) and the
// rendezvous tree's radix (0: 8).
inline TcpOptions hostOptions(std::chrono::milliseconds timeout, int groupMax = 0, int radix = 0) {
  TcpOptions o;
  o.timeout = timeout;
  o.hostGroupMax = groupMax;
  o.rendezvousTreeRadix = radix;
  return o;
}

inline bool sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0; }

// Every rank sends every other rank its rank: each uses every entry of its table.
inline void exchange(TcpBootstrap& b) {
  const int n = b.size();
  std::vector<int> out(n, b.rank()), in(n, -1);
  b.alltoall(out.data(), in.data(), sizeof(int));
  for (int r = 0; r < n; ++r) test::expect(in[r] == r, "block " + std::to_string(r) + " from its rank");
}

// exchange(), then an all-gather of 7r + 1 from every rank r.
inline void collectives(TcpBootstrap& b) {
  exchange(b);
  std::vector<int> all(static_cast<std::size_t>(b.size()), -1);
  all[static_cast<std::size_t>(b.rank())] = 7 * b.rank() + 1;
  b.allgather(all.data(), sizeof(int));
  for (int r = 0; r < b.size(); ++r)
    test::expect(all[static_cast<std::size_t>(r)] == 7 * r + 1, "all-gather entry " + std::to_string(r));
}

// The root's children in the host leaders' tree of `leaders` leaders.
inline int rootChildren(int leaders, int radix) {
  return static_cast<int>(rdv::treeChildren(0, leaders + 1, radix).size());
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

inline void expectSkippedOrPassed(int code, const std::string& text) {
  std::printf("%s", text.c_str());
  if (code == 77) {
    WARN(text);
    return;
  }
  INFO(text);
  CHECK(code == 0);
}

}  // namespace hostlocal
