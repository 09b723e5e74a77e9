#include "plain_socket.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdexcept>
#include <sys/socket.h>
#include <unistd.h>

namespace tether::chaos::testnet {

namespace {
[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what + ": " + std::strerror(errno)); }

sockaddr_in toAddress(const std::string& host, std::uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    throw std::runtime_error("not an IPv4 address: " + host);
  }
  return addr;
}

// Waits until fd is readable; false on deadline.
bool waitReadable(int fd, Clock::time_point deadline) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    int rc = ::poll(&p, 1, static_cast<int>(left));
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) fail("poll");
  }
}
}  // namespace

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

Fd listenOn(const std::string& host, std::uint16_t& port, int backlog) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) fail("socket");
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  auto addr = toAddress(host, port);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) fail("bind");
  if (::listen(fd.get(), backlog) != 0) fail("listen");
  socklen_t len = sizeof addr;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len);
  port = ntohs(addr.sin_port);
  return fd;
}

Fd connectTo(const std::string& host, std::uint16_t port) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) fail("socket");
  auto addr = toAddress(host, port);
  // Loopback connects complete or fail at once; a blocking connect cannot hang here.
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) fail("connect");
  int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

Fd acceptBefore(int listener, Clock::time_point deadline) {
  if (!waitReadable(listener, deadline)) throw std::runtime_error("accept: deadline passed");
  int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) fail("accept");
  return Fd(fd);
}

void writeAll(int fd, const void* data, std::size_t bytes) {
  auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::send(fd, p, bytes, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("send");
    }
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
}

std::size_t readSome(int fd, void* data, std::size_t bytes, Clock::time_point deadline) {
  if (!waitReadable(fd, deadline)) throw std::runtime_error("read: deadline passed");
  for (;;) {
    ssize_t n = ::recv(fd, data, bytes, 0);
    if (n >= 0) return static_cast<std::size_t>(n);
    if (errno != EINTR) fail("recv");
  }
}

void readExact(int fd, void* data, std::size_t bytes, Clock::time_point deadline) {
  auto* p = static_cast<char*>(data);
  while (bytes > 0) {
    std::size_t n = readSome(fd, p, bytes, deadline);
    if (n == 0) throw std::runtime_error("read: unexpected end of stream");
    p += n;
    bytes -= n;
  }
}

}  // namespace tether::chaos::testnet
