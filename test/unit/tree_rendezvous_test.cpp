// The tree rendezvous (rendezvous/tree.cpp) driven by hand through a fake
// Host: no sockets, no fork.
#include <catch2/catch.hpp>

#include <exception>
#include <memory>
#include <vector>

#include "rendezvous/rendezvous.hpp"

using namespace tether;

namespace {

struct FakeHost final : rdv::Host {
  std::vector<int> tablesTo, released;
  bool ended = false;
  std::exception_ptr error;
  void connect(int, const PeerAddress&) override {}
  void send(int peer, wire::Kind kind, wire::SharedBytes) override {
    if (kind == wire::Kind::Table) tablesTo.push_back(peer);
  }
  bool release(int peer) override {
    released.push_back(peer);
    return true;  // idle: the root waits for the close
  }
  void finished(std::exception_ptr e) override { ended = true, error = e; }
  void abortAll(const std::string&) override {}
  void post(std::function<void()> fn) override { fn(); }
};

wire::SharedBytes registration(int rank) {
  wire::Register r;
  r.rank = static_cast<std::uint32_t>(rank);
  r.address.addr[0] = 127, r.address.addr[3] = 1;
  r.address.port = static_cast<std::uint16_t>(40000 + rank);
  return std::make_shared<const wire::Bytes>(wire::encode(r));
}

}  // namespace

TEST_CASE("the tree's root survives a child's link coming up again after the table is out", "[unit][rendezvous]") {
  // Under a link budget the root's registration link to a child can be
  // closed before the table goes; the table's send dials the child again and
  // that link comes up while the root still waits for released links to
  // close. On ca9a580 the root then indexed a per-child vector only
  // non-root ranks fill: a segfault of rank 0 at 1,024 ranks, 3 runs in ~30.
  FakeHost host;
  rdv::Config c;
  c.rank = 0, c.nranks = 8, c.timeout = std::chrono::milliseconds(1000);
  auto tree = rdv::makeTree(host, c, 2);
  PeerAddress self;
  self.addr[0] = 127, self.addr[3] = 1, self.port = 40000;
  tree->start(self);
  for (int r = 1; r < c.nranks; ++r) {
    tree->onLinkUp(r);
    REQUIRE(tree->onFrame(r, wire::Kind::Register, registration(r)));
  }
  const std::vector<int> children = rdv::treeChildren(0, c.nranks, 2);
  REQUIRE(std::vector<int>(host.tablesTo.begin(), host.tablesTo.end()) == children);
  REQUIRE_FALSE(host.released.empty());
  REQUIRE_FALSE(tree->done());                       // waiting for the released links to close
  for (int child : children) tree->onLinkUp(child);  // the re-dialled links
  CHECK_FALSE(host.ended);
  for (int p : host.released) tree->onLinkDown(p, "idle close", true);
  CHECK(host.ended);
  CHECK_FALSE(host.error);
  CHECK(tree->done());
}
