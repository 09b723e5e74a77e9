// A stranger on the network: plain blocking sockets that connect to a tether
// listener and send whatever a test wants — nothing, garbage, half a header,
// a forged hello — then report how and when the listener hung up.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "wire/frame.hpp"
#include "wire/handshake.hpp"

namespace tether::fault {

class RawClient {
 public:
  RawClient(const std::string& host, std::uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw std::runtime_error("socket failed");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    ::inet_pton(AF_INET, host.c_str(), &a.sin_addr);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
      throw std::runtime_error("connect to " + host + ":" + std::to_string(port) + " failed");
    sockaddr_in local{};
    socklen_t len = sizeof local;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&local), &len);
    localPort_ = ntohs(local.sin_port);
  }
  ~RawClient() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  // Hangs up with a TCP RST (SO_LINGER 0), as port scanners do.
  void reset() {
    linger l{1, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    ::close(fd_);
    fd_ = -1;
  }

  // "127.0.0.1:PORT" as the listener logs us.
  std::string address() const { return "127.0.0.1:" + std::to_string(localPort_); }

  void send(const std::vector<unsigned char>& bytes) {
    std::size_t off = 0;
    while (off < bytes.size()) {
      ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return;  // the listener already hung up; the test looks at that
      off += static_cast<std::size_t>(n);
    }
  }

  // Reads exactly n bytes, or nullopt on EOF, error or deadline.
  std::optional<std::vector<unsigned char>> read(std::size_t n, std::chrono::milliseconds deadline) {
    std::vector<unsigned char> out(n);
    std::size_t got = 0;
    auto end = std::chrono::steady_clock::now() + deadline;
    while (got < n) {
      if (!waitReadable(end)) return std::nullopt;
      ssize_t r = ::recv(fd_, out.data() + got, n - got, 0);
      if (r <= 0) return std::nullopt;
      got += static_cast<std::size_t>(r);
    }
    return out;
  }

  // The next whole frame (header checked with the control limit), or nullopt.
  std::optional<std::pair<wire::FrameHeader, std::vector<unsigned char>>> readFrame(
      std::chrono::milliseconds deadline) {
    auto hb = read(wire::kHeaderBytes, deadline);
    if (!hb) return std::nullopt;
    auto h = wire::decodeHeader(hb->data(), wire::kMaxControlPayload, nullptr);
    if (!h) return std::nullopt;
    auto payload = read(h->length, deadline);
    if (!payload) return std::nullopt;
    return std::make_pair(*h, *payload);
  }

  // Milliseconds until the listener closed the connection (EOF or reset),
  // discarding anything it sends; nullopt if it is still open at the deadline.
  std::optional<long> msUntilClosed(std::chrono::milliseconds deadline) {
    auto start = std::chrono::steady_clock::now();
    auto end = start + deadline;
    for (;;) {
      if (!waitReadable(end)) return std::nullopt;
      unsigned char buf[512];
      ssize_t r = ::recv(fd_, buf, sizeof buf, 0);
      if (r <= 0)
        return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
    }
  }

 private:
  bool waitReadable(std::chrono::steady_clock::time_point end) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()).count();
    if (left < 0) left = 0;
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, static_cast<int>(left)) > 0;
  }
  int fd_ = -1;
  std::uint16_t localPort_ = 0;
};

// A frame as tether encodes it (header + payload).
inline std::vector<unsigned char> frameBytes(wire::Kind kind, const std::vector<unsigned char>& payload) {
  wire::FrameHeader h;
  h.kind = kind;
  h.length = payload.size();
  auto hb = wire::encodeHeader(h);
  std::vector<unsigned char> out(hb.begin(), hb.end());
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

}  // namespace tether::fault
