// Which address a rank listens on when nothing names one (no listenHost, no
// TETHER_SOCKET_IFNAME). Each scenario runs in a child process inside a fresh
// network namespace that only the child sees (unshare: it disappears with the
// child on every exit path) holding lo, decoys (docker0, virbr0, a veth*, a
// link-local-only interface) and eth0-like interfaces built from veth pairs.
// No traffic leaves the namespace. Needs root; exits 77 with the reason
// otherwise.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/endpoint.hpp"
#include "netns.hpp"
#include "tether/tether.hpp"

using namespace tether;
using test::firstLine;
using test::inNamespace;

namespace {

// Decoys that must never be chosen, created before the real interfaces so that
// "the first interface that is up" would pick one of them.
const std::vector<std::string> kDecoys = {
    "ip link set lo up",
    "ip link add docker0 type bridge",
    "ip addr add 172.17.0.1/16 dev docker0",
    "ip link set docker0 up",
    "ip link add virbr0 type bridge",
    "ip addr add 192.168.122.1/24 dev virbr0",
    "ip link set virbr0 up",
    "ip link add veth1a2b type veth peer name veth1a2c",
    "ip addr add 10.88.0.1/24 dev veth1a2b",
    "ip link set veth1a2b up",
    "ip link set veth1a2c up",
    "ip link add lla0 type veth peer name lla0p",
    "ip addr add 169.254.10.10/16 dev lla0",
    "ip link set lla0 up",
    "ip link set lla0p up",
};

// A veth pair `name`/`name`p with `cidr` on `name`; both ends up (the peer
// has only an IPv6 link-local address, which must be skipped too).
std::vector<std::string> nic(const std::string& name, const std::string& cidr) {
  return {"ip link add " + name + " type veth peer name " + name + "p", "ip addr add " + cidr + " dev " + name,
          "ip link set " + name + " up", "ip link set " + name + "p up"};
}

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string rootOfNewId() {
  ::unsetenv("TETHER_SOCKET_IFNAME");
  ::unsetenv("TETHER_SOCKET_FAMILY");
  auto id = TcpBootstrap::createUniqueId();
  // Rank 0 of a one-rank world adopts the reserved root socket: the address is usable.
  TcpBootstrap b(0, 1, id, TcpOptions{std::chrono::seconds(10), {}, {}, {}});
  b.barrier();
  return id.rootHost();
}

}  // namespace

TEST_CASE("createUniqueId puts the default route's interface in the id, not loopback or a decoy", "[netns]") {
  auto o = inNamespace(kDecoys + nic("ens9", "10.44.0.2/24") + nic("eth0", "10.99.0.2/24") +
                           std::vector<std::string>{"ip route add default via 10.99.0.1 dev eth0"},
                       rootOfNewId);
  INFO(o.output);
  REQUIRE(o.code == 0);
  CHECK(firstLine(o.output) == "10.99.0.2");
  CHECK(contains(o.output, "INFO] listen address 10.99.0.2 on eth0 (the default route's interface)"));
}

TEST_CASE("without a default route the first usable interface is chosen, decoys skipped", "[netns]") {
  auto o = inNamespace(kDecoys + nic("ens9", "10.44.0.2/24"), rootOfNewId);
  INFO(o.output);
  REQUIRE(o.code == 0);
  CHECK(firstLine(o.output) == "10.44.0.2");
}

TEST_CASE("a default route through a decoy is not followed", "[netns]") {
  auto o = inNamespace(kDecoys + nic("ens9", "10.44.0.2/24") +
                           std::vector<std::string>{"ip route add default via 172.17.0.254 dev docker0"},
                       rootOfNewId);
  INFO(o.output);
  REQUIRE(o.code == 0);
  CHECK(firstLine(o.output) == "10.44.0.2");
}

TEST_CASE("with only loopback and decoys up, the id uses loopback and says so in a WARN", "[netns]") {
  auto o = inNamespace(kDecoys, rootOfNewId);
  INFO(o.output);
  REQUIRE(o.code == 0);
  CHECK(firstLine(o.output) == "127.0.0.1");
  CHECK(contains(o.output, "WARN] no usable network interface is up"));
  CHECK(contains(o.output, "TETHER_SOCKET_IFNAME"));
}

TEST_CASE("TETHER_SOCKET_FAMILY=AF_INET6 takes the default route's global IPv6 address", "[netns]") {
  auto o = inNamespace(kDecoys + nic("ens9", "10.44.0.2/24") + nic("eth0", "10.99.0.2/24") +
                           std::vector<std::string>{"ip -6 addr add fd00:99::2/64 dev eth0 nodad",
                                                    "ip -6 addr add fd00:44::2/64 dev ens9 nodad",
                                                    "ip route add default via 10.99.0.1 dev eth0",
                                                    "ip -6 route add default via fd00:99::1 dev eth0"},
                       [] {
                         ::setenv("TETHER_SOCKET_FAMILY", "AF_INET6", 1);
                         return TcpBootstrap::createUniqueId().rootHost();
                       });
  INFO(o.output);
  REQUIRE(o.code == 0);
  CHECK(firstLine(o.output) == "fd00:99::2");
}

TEST_CASE("a non-root rank listens on the interface on the root's subnet", "[netns]") {
  auto o = inNamespace(kDecoys + nic("eth0", "10.99.0.2/24") + nic("ib0", "10.55.0.2/24") +
                           std::vector<std::string>{"ip route add default via 10.99.0.1 dev eth0"},
                       [] {
                         return chooseListenAddress(asio::ip::make_address("10.55.0.1"), "").to_string() + "," +
                                chooseListenAddress(asio::ip::make_address("10.200.0.9"), "").to_string();
                       });
  INFO(o.output);
  REQUIRE(o.code == 0);
  // The root's subnet first; a root elsewhere: the address its route leaves from.
  CHECK(firstLine(o.output) == "10.55.0.2,10.99.0.2");
  CHECK(contains(o.output, "listen address 10.55.0.2 on ib0 (on the root's subnet 10.55.0.0/24)"));
}

TEST_CASE("TETHER_SOCKET_IFNAME still decides when set", "[netns]") {
  auto o = inNamespace(kDecoys + nic("ens9", "10.44.0.2/24") + nic("eth0", "10.99.0.2/24") +
                           std::vector<std::string>{"ip route add default via 10.99.0.1 dev eth0"},
                       [] {
                         ::setenv("TETHER_SOCKET_IFNAME", "=ens9", 1);
                         return TcpBootstrap::createUniqueId().rootHost();
                       });
  INFO(o.output);
  REQUIRE(o.code == 0);
  CHECK(firstLine(o.output) == "10.44.0.2");
}

TEST_CASE("TETHER_SOCKET_IFNAME that matches no interface: the error names the rank, as every other does", "[netns]") {
  auto o = inNamespace(kDecoys + nic("eth0", "10.99.0.2/24"), [] {
    ::setenv("TETHER_SOCKET_IFNAME", "ib", 1);
    auto id = TcpBootstrap::createUniqueId("10.99.0.2:0");  // an explicit root: no interface chosen yet
    TcpBootstrap b(1, 2, id, TcpOptions{std::chrono::seconds(5), {}, {}, {}});
    return std::string("joined");
  });
  INFO(o.output);
  REQUIRE(o.code == 2);
  CHECK(firstLine(o.output) == "threw: rank 1: TETHER_SOCKET_IFNAME='ib' matches no interface that is up");
}

int main(int argc, char** argv) {
  // Can this machine build what the scenarios need?
  const auto unusable =
      test::namespacesUnusable(nic("eth0", "10.99.0.2/24") + std::vector<std::string>{"ip link add br9 type bridge"});
  if (!unusable.empty()) {
    std::printf("SKIP: %s\n", unusable.c_str());
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
