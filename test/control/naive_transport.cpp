// CONTROL ONLY, deliberately broken — see naive_transport.hpp.
#include "naive_transport.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "chaos_proxy.hpp"  // splitHostPort
#include "plain_socket.hpp"

namespace tether::control {

namespace {

struct WireHeader {
  std::int32_t source;
  std::int32_t tag;
  std::uint64_t bytes;
};

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what + ": " + std::strerror(errno)); }

bool waitReadable(int fd, NaiveRank::Clock::time_point deadline) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - NaiveRank::Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    int rc = ::poll(&p, 1, static_cast<int>(left));
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) fail("poll");
  }
}

void readExact(int fd, void* data, std::size_t bytes, NaiveRank::Clock::time_point deadline) {
  auto* p = static_cast<char*>(data);
  while (bytes > 0) {
    if (!waitReadable(fd, deadline)) throw std::runtime_error("naive transport: read deadline passed");
    ssize_t n = ::recv(fd, p, bytes, 0);
    if (n == 0) throw std::runtime_error("naive transport: connection closed mid-message");
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("recv");
    }
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
}

using chaos::testnet::writeAll;  // the proxy tests' socket helper

}  // namespace

NaiveRank::NaiveRank(int rank, int nranks, std::chrono::milliseconds timeout)
    : rank_(rank), nranks_(nranks), timeout_(timeout) {
  listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener_ < 0) fail("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listener_, 1024) != 0) {
    int saved = errno;
    ::close(listener_);
    errno = saved;
    fail("bind/listen");
  }
  socklen_t len = sizeof addr;
  ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
}

NaiveRank::~NaiveRank() { ::close(listener_); }

void NaiveRank::setPeers(std::vector<std::string> addresses) { peers_ = std::move(addresses); }

void NaiveRank::send(int peer, int tag, const void* data, std::size_t bytes) {
  auto [host, port] = chaos::splitHostPort(peers_.at(static_cast<std::size_t>(peer)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  inet_pton(AF_INET, host.c_str(), &addr.sin_addr);
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail("socket");
  try {
    // Loopback connect: completes or is refused at once.
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) fail("connect");
    WireHeader h{rank_, tag, bytes};
    writeAll(fd, &h, sizeof h);
    writeAll(fd, data, bytes);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
}

NaiveRank::Message NaiveRank::acceptOne(Clock::time_point deadline) {
  if (!waitReadable(listener_, deadline)) {
    throw std::runtime_error("naive transport: rank " + std::to_string(rank_) + " accept deadline passed");
  }
  int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) fail("accept");
  try {
    WireHeader h{};
    readExact(fd, &h, sizeof h, deadline);
    Message m{h.source, h.tag, std::vector<unsigned char>(h.bytes)};
    readExact(fd, m.data.data(), m.data.size(), deadline);
    ::close(fd);
    return m;
  } catch (...) {
    ::close(fd);
    throw;
  }
}

void NaiveRank::recv(int peer, int tag, void* data, std::size_t bytes) {
  auto deadline = Clock::now() + timeout_;
  for (auto it = parked_.begin(); it != parked_.end(); ++it) {
    if (it->peer == peer && it->tag == tag) {
      if (it->data.size() != bytes) throw std::runtime_error("naive transport: size mismatch");
      std::memcpy(data, it->data.data(), bytes);
      parked_.erase(it);
      return;
    }
  }
  for (;;) {
    Message m = acceptOne(deadline);
    if (m.peer == peer && m.tag == tag) {
      if (m.data.size() != bytes) throw std::runtime_error("naive transport: size mismatch");
      std::memcpy(data, m.data.data(), bytes);
      return;
    }
    parked_.push_back(std::move(m));
  }
}

void NaiveRank::alltoall(const void* sendData, void* recvData, std::size_t bytesPerRank) {
  auto* in = static_cast<const unsigned char*>(sendData);
  auto* out = static_cast<unsigned char*>(recvData);
  std::memcpy(out + rank_ * bytesPerRank, in + rank_ * bytesPerRank, bytesPerRank);
  for (int s = 1; s < nranks_; ++s) {
    int to = (rank_ + s) % nranks_;
    int from = (rank_ - s + nranks_) % nranks_;
    send(to, s - 1, in + to * bytesPerRank, bytesPerRank);
    recv(from, s - 1, out + from * bytesPerRank, bytesPerRank);
  }
}

}  // namespace tether::control
