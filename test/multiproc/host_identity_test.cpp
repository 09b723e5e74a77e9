// Host identity (docs/design.md, "Host identity"): which ranks share a node
// (nodeId, nnodes, nranksPerNode, localRank, splitByNode) and which meet in a
// host-local group. Each rank is a "machine" made of namespaces: its own host
// name (a UTS namespace) and, where a case needs one, its own boot id (a
// mount namespace in which a file covers /proc/sys/kernel/random/boot_id);
// "pods" of one machine are network namespaces (host_local_support.hpp).
// Needs root: skipped (with a warning) without it.
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

#include "host_local_support.hpp"
#include "multiproc.hpp"
#include "rendezvous/rendezvous.hpp"

using namespace tether;
using namespace std::chrono_literals;
using namespace hostlocal;

namespace {

struct Machine {
  std::string hostname;
  std::string bootId;  // empty: the kernel's own
  std::string hostId;  // TETHER_HOST_ID; empty: unset
};

// Whether this process may make the namespaces (a child tries).
bool canMakeMachines() {
  std::string text;
  return inChild(
             [] {
               if (::unshare(CLONE_NEWUTS | CLONE_NEWNS) != 0) return 1;
               return ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 ? 0 : 1;
             },
             text) == 0;
}

// Makes this process `m`: its host name, its boot id, its TETHER_HOST_ID.
void become(const Machine& m) {
  test::expect(::unshare(CLONE_NEWUTS) == 0 && ::sethostname(m.hostname.data(), m.hostname.size()) == 0,
               "a host name of its own");
  if (!m.bootId.empty()) {
    test::expect(::unshare(CLONE_NEWNS) == 0 && ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0,
                 "a mount namespace of its own");
    char path[] = "/tmp/tether-boot-id-XXXXXX";
    const int fd = ::mkstemp(path);
    const std::string line = m.bootId + "\n";
    test::expect(fd >= 0 && ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()), "boot id file");
    ::close(fd);
    const bool bound = ::mount(path, "/proc/sys/kernel/random/boot_id", nullptr, MS_BIND, nullptr) == 0;
    ::unlink(path);  // the mount holds it
    test::expect(bound, "a boot id of its own");
  }
  if (m.hostId.empty())
    ::unsetenv("TETHER_HOST_ID");
  else
    ::setenv("TETHER_HOST_ID", m.hostId.c_str(), 1);
}

// Ranks r*perNode .. r*perNode+perNode-1 form node r: every rank checks its
// topology and splitByNode's child.
void expectNodes(TcpBootstrap& b, int perNode) {
  const int r = b.rank(), n = b.size();
  const std::string seen = "nnodes " + std::to_string(b.nnodes()) + " nodeId " + std::to_string(b.nodeId()) +
                           " localRank " + std::to_string(b.localRank()) + " nranksPerNode " +
                           std::to_string(b.nranksPerNode());
  test::expect(b.nnodes() == n / perNode && b.nodeId() == r / perNode && b.localRank() == r % perNode &&
                   b.nranksPerNode() == perNode,
               "rank " + std::to_string(r) + ": " + std::to_string(n / perNode) + " nodes of " +
                   std::to_string(perNode) + " expected, saw " + seen);
  auto node = b.splitByNode();
  test::expect(node->size() == perNode && node->rank() == r % perNode && node->nnodes() == 1,
               "rank " + std::to_string(r) + ": splitByNode's child has " + std::to_string(node->size()) + " ranks");
}

// `n` ranks, rank r made `machine(r)`, with host-local aggregation and
// TETHER_LOCAL_NRANKS=`perGroup`: each checks nodes of `perNode` ranks and
// the collectives; rank 0 checks that `groups` host-local groups registered.
// Returns 0, 1 (failed; `text` says why) or 77 (cannot make namespaces).
int runMachines(int n, const std::function<Machine(int)>& machine, int perNode, int perGroup, int groups,
                std::string& text) {
  if (::geteuid() != 0 || !canMakeMachines()) {
    text = "SKIP: cannot make UTS and mount namespaces (needs root)\n";
    return 77;
  }
  return inChild(
      [&] {
        ::setenv("TETHER_HOST_LOCAL", "1", 1);
        ::setenv("TETHER_LOCAL_NRANKS", std::to_string(perGroup).c_str(), 1);
        auto res = test::runRanks(
            n,
            [&](int rank, const UniqueId& id) {
              become(machine(rank));
              TcpBootstrap b(rank, n, id, TcpOptions{30s, {}, {}, {}});
              expectNodes(b, perNode);
              collectives(b);
              if (rank == 0)
                test::expect(rdv::hostRegistrationsReceived() == groups,
                             std::to_string(groups) + " host-local groups expected, the root counted " +
                                 std::to_string(rdv::hostRegistrationsReceived()));
              b.barrier();
            },
            60s);
        std::string failures;
        for (const auto& r : res)
          if (r.exitCode != 0) failures += test::summary({r});
        std::printf("%s", failures.c_str());
        return failures.empty() ? 0 : 1;
      },
      text);
}

}  // namespace

// Images all called "localhost" on two machines: before, one node of 4 (the
// host name alone), and a runtime would use CUDA IPC across the machines.
TEST_CASE("two machines with one host name are two nodes: their boot ids differ", "[multiproc][host-identity]") {
  std::string text;
  const int code = runMachines(
      4,
      [](int r) {
        return Machine{"localhost",
                       r < 2 ? "0b0b0b0b-0000-4000-8000-00000000000a" : "0b0b0b0b-0000-4000-8000-00000000000b", ""};
      },
      2, 2, 2, text);
  expectSkippedOrPassed(code, text);
}

TEST_CASE(
    "TETHER_HOST_ID decides the node: two ids on one host name and kernel are two nodes, one id over two "
    "host names is one",
    "[multiproc][host-identity]") {
  std::string text;
  int code = runMachines(
      4,
      [](int r) {
        return Machine{"localhost", "", r < 2 ? "rack1-node7" : "rack1-node8"};
      },
      2, 2, 2, text);
  expectSkippedOrPassed(code, text);
  text.clear();
  // One machine whose ranks run in containers with host names of their own:
  // the cluster says they are one node. They meet in one host-local group.
  code = runMachines(
      4,
      [](int r) {
        return Machine{"pod-" + std::to_string(r), "", "rack1-node7"};
      },
      4, 4, 1, text);
  expectSkippedOrPassed(code, text);
}

// The rule's safe side: containers of one kernel with host names of their
// own are different nodes unless TETHER_HOST_ID says otherwise (as NCCL's
// host hash: host name and boot id).
TEST_CASE("ranks of one kernel with two host names are two nodes, and meet in two host-local groups",
          "[multiproc][host-identity]") {
  std::string text;
  const int code = runMachines(
      4,
      [](int r) {
        return Machine{r < 2 ? "pod-a" : "pod-b", "", ""};
      },
      2, 2, 2, text);
  expectSkippedOrPassed(code, text);
}

// Pods of one machine with a fixed host name, each in its own network
// namespace: one node (one kernel, one host name), but the abstract socket
// where a host's ranks meet is per network namespace, so they meet in two
// groups (docs/design.md, "Host identity").
TEST_CASE("one machine's ranks in two network namespaces are one node and meet in two host-local groups",
          "[multiproc][host-identity]") {
  std::string text;
  const int code = inChild(
      [] {
        const int pods = 2, perPod = 2, n = pods * perPod;
        if (!canMakeMachines()) return 77;
        Hosts h(pods);
        if (!h.prepare(perPod)) return 77;
        auto res = test::runRanks(
            n,
            [&](int rank, const UniqueId& id) {
              h.enter(rank / perPod);
              become(Machine{"localhost", "", ""});
              TcpBootstrap b(rank, n, id, TcpOptions{30s, {}, {}, {}});
              expectNodes(b, n);
              collectives(b);
              if (rank == 0)
                test::expect(
                    rdv::hostRegistrationsReceived() == pods,
                    "one registration per network namespace, got " + std::to_string(rdv::hostRegistrationsReceived()));
              b.barrier();
            },
            60s, "10.201.0.1:0");
        std::string failures;
        for (const auto& r : res)
          if (r.exitCode != 0) failures += test::summary({r});
        std::printf("%s", failures.c_str());
        return failures.empty() ? 0 : 1;
      },
      text);
  expectSkippedOrPassed(code, text);
}
