// accept-order-repro — does accept() hand out connections in the order they
// were made? No tether needed: plain POSIX sockets and threads.
//
// Each sender thread opens --connections short-lived connections to one
// listener, strictly one after another (connect, write its sender id and
// sequence number, close), exactly like a bootstrap that opens a connection per
// message. The receiver accepts them and counts "late" connections: one whose
// sequence number is lower than one already accepted from the same sender. Any
// late connection is an accept order that differs from the connect order — the
// root of the payload-swap bug class (docs/ordering.md).
//
// --busy-receiver makes the receiver spin between accepts so the accept queue
// fills; --busy-cpus keeps cores busy the way softirq-loaded CPUs are;
// --backlog sets the listen() queue length. --listen-netns / --sender-netns
// put the listener and the senders into existing network namespaces (Linux,
// root), so connections cross a veth pair — the receive path of a real NIC
// (per-CPU backlog, softirq) instead of loopback.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <cxxopts.hpp>

namespace {

using Clock = std::chrono::steady_clock;

struct Record {
  std::uint32_t sender;
  std::uint32_t sequence;
};

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what + ": " + std::strerror(errno)); }

sockaddr_in address(const std::string& host, std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  if (inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) throw std::runtime_error("bad IPv4 address " + host);
  return a;
}

// Linux TcpExt counters (ListenOverflows, ListenDrops) from /proc/net/netstat.
std::map<std::string, long long> tcpExtCounters() {
  std::ifstream in("/proc/net/netstat");
  std::string names, values;
  std::map<std::string, long long> out;
  while (std::getline(in, names) && std::getline(in, values)) {
    if (names.rfind("TcpExt:", 0) != 0) continue;
    std::istringstream n(names), v(values);
    std::string name, value;
    n >> name;
    v >> value;
    while (n >> name && v >> value) out[name] = std::stoll(value);
  }
  return out;
}

// Moves the calling thread into /var/run/netns/NAME (no-op for "").
void enterNetns(const std::string& name) {
  if (name.empty()) return;
  std::string path = "/var/run/netns/" + name;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("open " + path);
  int rc = ::setns(fd, CLONE_NEWNET);
  ::close(fd);
  if (rc != 0) fail("setns " + name);
}

void spinFor(std::chrono::microseconds d) {
  // Deliberately burns CPU: this program simulates a busy host.
  auto until = Clock::now() + d;
  while (Clock::now() < until) {
  }
}

void sendOne(const sockaddr_in& target, Record record) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail("socket");
  // Loopback/local connects finish or fail quickly; the kernel's SYN retries bound the rest.
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&target), sizeof target) != 0) {
    ::close(fd);
    fail("connect");
  }
  if (::send(fd, &record, sizeof record, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof record)) {
    ::close(fd);
    fail("send");
  }
  ::close(fd);
}

bool readRecord(int fd, Record& record, int timeoutMs) {
  auto* p = reinterpret_cast<char*>(&record);
  std::size_t got = 0;
  while (got < sizeof record) {
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, timeoutMs) <= 0) return false;
    ssize_t n = ::recv(fd, p + got, sizeof record - got, 0);
    if (n <= 0) return false;
    got += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  cxxopts::Options cli("accept-order-repro", "Counts how often accept() order differs from connect() order");
  cli.add_options()("connections", "connections per sender", cxxopts::value<int>()->default_value("10000"))(
      "senders", "concurrent sender threads", cxxopts::value<int>()->default_value("1"))(
      "busy-receiver", "receiver spins this many microseconds after each accept",
      cxxopts::value<int>()->default_value("0"))("busy-cpus", "extra threads that keep CPUs busy meanwhile",
                                                 cxxopts::value<int>()->default_value("0"))(
      "backlog", "listen() backlog", cxxopts::value<int>()->default_value("4096"))(
      "host", "IPv4 address to listen on and connect to", cxxopts::value<std::string>()->default_value("127.0.0.1"))(
      "port", "port to listen on (0: any free port)", cxxopts::value<int>()->default_value("0"))(
      "listen-netns", "network namespace of the listener", cxxopts::value<std::string>()->default_value(""))(
      "sender-netns", "network namespace of the senders", cxxopts::value<std::string>()->default_value(""))(
      "timeout-ms", "give up when no connection arrives for this long", cxxopts::value<int>()->default_value("10000"))(
      "h,help", "show this help");
  try {
    auto args = cli.parse(argc, argv);
    if (args.count("help")) {
      std::cout << cli.help() << '\n';
      return 0;
    }
    const int perSender = args["connections"].as<int>();
    const int senders = args["senders"].as<int>();
    const int busyUs = args["busy-receiver"].as<int>();
    const int busyCpus = args["busy-cpus"].as<int>();
    const int timeoutMs = args["timeout-ms"].as<int>();
    const auto host = args["host"].as<std::string>();
    if (perSender <= 0 || senders <= 0) throw std::invalid_argument("--connections and --senders must be > 0");

    const auto senderNetns = args["sender-netns"].as<std::string>();
    enterNetns(args["listen-netns"].as<std::string>());
    int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listener < 0) fail("socket");
    int one = 1;
    ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    auto addr = address(host, static_cast<std::uint16_t>(args["port"].as<int>()));
    if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) fail("bind");
    if (::listen(listener, args["backlog"].as<int>()) != 0) fail("listen");
    socklen_t len = sizeof addr;
    ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);

    auto before = tcpExtCounters();
    std::atomic<bool> done{false};
    std::vector<std::thread> burners;
    for (int i = 0; i < busyCpus; ++i) {
      burners.emplace_back([&] {
        while (!done.load(std::memory_order_relaxed)) spinFor(std::chrono::microseconds(1000));
      });
    }
    std::atomic<int> sendErrors{0};
    std::vector<std::thread> senderThreads;
    auto start = Clock::now();
    for (int s = 0; s < senders; ++s) {
      senderThreads.emplace_back([&, s] {
        try {
          enterNetns(senderNetns);
        } catch (const std::exception& e) {
          if (sendErrors.fetch_add(perSender) == 0) std::cerr << "sender " << s << ": " << e.what() << '\n';
          return;
        }
        for (int i = 0; i < perSender; ++i) {
          try {
            sendOne(addr, Record{static_cast<std::uint32_t>(s), static_cast<std::uint32_t>(i)});
          } catch (const std::exception& e) {
            if (sendErrors++ == 0) std::cerr << "sender " << s << ": " << e.what() << '\n';
          }
        }
      });
    }

    const long long expected = static_cast<long long>(perSender) * senders;
    std::vector<long long> highest(senders, -1);
    long long accepted = 0, late = 0, maxDisplacement = 0, unreadable = 0;
    while (accepted + unreadable < expected - sendErrors.load()) {
      pollfd pfd{listener, POLLIN, 0};
      if (::poll(&pfd, 1, timeoutMs) <= 0) {
        std::cerr << "no connection for " << timeoutMs << " ms, stopping\n";
        break;
      }
      int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      Record r{};
      bool ok = readRecord(fd, r, timeoutMs) && r.sender < static_cast<std::uint32_t>(senders);
      ::close(fd);
      if (!ok) {
        unreadable++;
        continue;
      }
      accepted++;
      if (static_cast<long long>(r.sequence) < highest[r.sender]) {
        late++;
        maxDisplacement = std::max(maxDisplacement, highest[r.sender] - r.sequence);
      } else {
        highest[r.sender] = r.sequence;
      }
      if (busyUs > 0) spinFor(std::chrono::microseconds(busyUs));
    }
    for (auto& t : senderThreads) t.join();
    done = true;
    for (auto& t : burners) t.join();
    ::close(listener);
    double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    auto after = tcpExtCounters();

    std::printf("senders %d x connections %d, busy-receiver %d us, busy-cpus %d, backlog %d\n", senders, perSender,
                busyUs, busyCpus, args["backlog"].as<int>());
    std::printf("accepted %lld of %lld in %.2f s (%lld unreadable, %d send errors)\n", accepted, expected, seconds,
                unreadable, sendErrors.load());
    std::printf("accept order != connect order: %lld late connections (%.4f%%), max displacement %lld\n", late,
                accepted ? 100.0 * static_cast<double>(late) / static_cast<double>(accepted) : 0.0, maxDisplacement);
    std::printf("kernel TcpExt ListenOverflows +%lld, ListenDrops +%lld\n",
                after["ListenOverflows"] - before["ListenOverflows"], after["ListenDrops"] - before["ListenDrops"]);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "accept-order-repro: " << e.what() << '\n';
    return 2;
  }
}
