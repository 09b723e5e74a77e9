// plain_socket.hpp — tiny blocking POSIX socket helpers for tests, every wait
// bounded by a deadline (a hang becomes a thrown error, not a stuck test).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace tether::chaos::testnet {

using Clock = std::chrono::steady_clock;

// Owns a file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd();
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept;
  int get() const { return fd_; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// Listening socket on host:0 (or a given port); `port` receives the bound port.
Fd listenOn(const std::string& host, std::uint16_t& port, int backlog = 1024);
Fd connectTo(const std::string& host, std::uint16_t port);
// Throws std::runtime_error when nothing arrives before `deadline`.
Fd acceptBefore(int listener, Clock::time_point deadline);
void writeAll(int fd, const void* data, std::size_t bytes);
// Reads exactly `bytes`; throws on EOF or deadline.
void readExact(int fd, void* data, std::size_t bytes, Clock::time_point deadline);
// One read() of at most `bytes`; returns 0 on EOF; throws on deadline.
std::size_t readSome(int fd, void* data, std::size_t bytes, Clock::time_point deadline);

inline Clock::time_point after(std::chrono::milliseconds ms) { return Clock::now() + ms; }

}  // namespace tether::chaos::testnet
