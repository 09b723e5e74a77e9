// A rank that dials its root before the root listens, on the same host, at a
// port inside the ephemeral range (a random MASTER_PORT, a port picked by
// bind(0)): the kernel may give the dial that very port as its own, and TCP's
// simultaneous open then connects the socket to itself. Before the fix the
// dialer kept it, waiting for a challenge nobody sends: the root failed "address
// in use" and the rank timed out (the two-jobs launch test's rare failure).
// Likewise a rank's listener, bound to port 0, may be given the root's port.
// Each scenario runs in a fresh network namespace whose ephemeral range is
// narrowed so that the kernel's choice is forced. Needs root; exits 77 with
// the reason otherwise.
#define CATCH_CONFIG_RUNNER
#include <sys/socket.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <catch2/catch.hpp>
#include <cstdio>
#include <string>
#include <thread>

#include "link/tcp_stream.hpp"
#include "netns.hpp"
#include "tether/tether.hpp"

using namespace tether;
using namespace std::chrono_literals;
namespace asio = boost::asio;

namespace {

// Ephemeral ports first..last only; a connect() tries the even ones first.
std::vector<std::string> portRange(int first, int last) {
  return {"ip link set lo up",
          // (inner shell: the runner sends the command's own output to /dev/null)
          "sh -c 'echo " + std::to_string(first) + " " + std::to_string(last) +
              " > /proc/sys/net/ipv4/ip_local_port_range'"};
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("a dial that the kernel connects to itself is refused and leaves the port free", "[netns][self-connect]") {
  // One ephemeral port: the dial to it can only come from it.
  auto o = test::inNamespace(portRange(40000, 40000), [] {
    asio::io_context io;
    link::TcpDialer dialer(io, {});
    auto s = dialer.open();
    std::string what;
    const link::Endpoint root{"tcp", "127.0.0.1:40000"};  // named: GCC 12 frees a temporary in co_await twice
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          try {
            co_await s->connect(root);
            what = "connected";
          } catch (const boost::system::system_error& e) {
            what =
                (e.code() == asio::error::connection_refused ? "refused: " : "other error: ") + std::string(e.what());
          }
        },
        asio::detached);
    io.run();
    // The port is free again at once (no socket, not even one in TIME_WAIT):
    // a listener binds it without SO_REUSEADDR.
    boost::system::error_code ec;
    auto l = link::TcpListener::open(io, {}, {asio::ip::make_address("127.0.0.1"), 40000}, false, std::nullopt, ec);
    return what + "\nlisten afterwards: " + (ec ? ec.message() : "ok");
  });
  INFO(o.output);
  REQUIRE(o.code == 0);
  CHECK(test::firstLine(o.output).rfind("refused: connected to itself: nothing listens there", 0) == 0);
  CHECK(contains(o.output, "listen afterwards: ok"));
}

TEST_CASE("a rank that dials its root before it listens joins once it does, at a port of the ephemeral range",
          "[netns][self-connect]") {
  // Rank 1's listener takes an odd port (bind(0) favours them); its dials to
  // the root's port 40000 come from 40000 or 40002 in turn, so one of its first
  // two connects itself. The root listens a second later.
  auto o = test::inNamespace(portRange(40000, 40003), [] {
    const auto id = TcpBootstrap::uniqueIdFromRoot("127.0.0.1:40000");
    auto join = [&](int rank) -> std::string {
      try {
        TcpBootstrap b(rank, 2, id, TcpOptions{5000ms, {}, {}, {}});
        int v[2] = {0, 0};
        v[rank] = 10 + rank;
        b.allgather(v, sizeof(int));
        return v[0] == 10 && v[1] == 11 ? "joined" : "wrong data";
      } catch (const std::exception& e) {
        return e.what();
      }
    };
    std::string rank1 = "did not run";
    std::thread early([&] { rank1 = join(1); });
    std::this_thread::sleep_for(1s);
    const std::string rank0 = join(0);
    early.join();
    return "rank 0: " + rank0 + "\nrank 1: " + rank1;
  });
  INFO(o.output);
  REQUIRE(o.code == 0);
  CHECK(contains(o.output, "rank 0: joined\n"));
  CHECK(contains(o.output, "rank 1: joined\n"));
  CHECK_FALSE(contains(o.output, "connected, but no answer"));
}

TEST_CASE("a rank whose listener is given its root's free port takes another, so that the root can listen",
          "[netns][self-connect]") {
  // Two ephemeral ports: bind(0) gives the odd one, 40001, the root's port.
  auto o = test::inNamespace(portRange(40000, 40001), [] {
    std::string rank1 = "did not run";
    std::thread early([&] {
      try {
        TcpBootstrap b(1, 2, TcpBootstrap::uniqueIdFromRoot("127.0.0.1:40001"), TcpOptions{1500ms, {}, {}, {}});
      } catch (const std::exception& e) {
        rank1 = e.what();  // this test's root only listens
      }
    });
    std::this_thread::sleep_for(500ms);  // rank 1 listens by now
    asio::io_context io;
    boost::system::error_code ec;
    auto root = link::TcpListener::open(io, {}, {asio::ip::make_address("127.0.0.1"), 40001}, true, std::nullopt, ec);
    const std::string listened = ec ? ec.message() : "ok";
    root.reset();
    early.join();
    return "root listens: " + listened + "\nrank 1: " + rank1;
  });
  INFO(o.output);
  REQUIRE(o.code == 0);
  CHECK(test::firstLine(o.output) == "root listens: ok");
  CHECK_FALSE(contains(o.output, "the listener there is rank 1"));  // rank 1 dialled its own listener
  CHECK(contains(o.output, "the port given to this rank's listener is the root's (127.0.0.1:40001): taking another"));
  CHECK(contains(o.output, "listening on 127.0.0.1:40000"));
}

int main(int argc, char** argv) {
  const auto unusable = test::namespacesUnusable(portRange(40000, 40003));
  if (!unusable.empty()) {
    std::printf("SKIP: %s\n", unusable.c_str());
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
