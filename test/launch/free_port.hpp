// A loopback port for tests that need a fixed root address, held for as long
// as the object lives: bound with SO_REUSEADDR but not listening (as
// createUniqueId() holds a root's port). A root still binds and listens there
// (tether's root sets SO_REUSEADDR), but nothing else can take the port
// meanwhile: no rank's listener bound to port 0, no dial's source port. A port
// that was only free when picked could be taken by either before the root
// came up, and then no root of the test could listen.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

namespace tether::test {

class ReservedLoopbackPort {
 public:
  ReservedLoopbackPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd_ < 0 || ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      if (fd_ >= 0) ::close(fd_);
      throw std::runtime_error("cannot reserve a loopback port");
    }
    port_ = ntohs(a.sin_port);
  }
  ~ReservedLoopbackPort() { ::close(fd_); }
  ReservedLoopbackPort(const ReservedLoopbackPort&) = delete;
  ReservedLoopbackPort& operator=(const ReservedLoopbackPort&) = delete;

  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

}  // namespace tether::test
