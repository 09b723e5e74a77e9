#include "rendezvous/reserved_listener.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "base/endpoint.hpp"
#include "tether/error.hpp"

namespace tether::reserved {
namespace {

std::mutex& mutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, int>& fds() {
  static std::map<std::string, int> m;
  return m;
}
std::string keyOf(const PeerAddress& a) { return toString(toEndpoint(a)); }

}  // namespace

PeerAddress reserve(const PeerAddress& addr) {
  auto ep = toEndpoint(addr);
  int fd = ::socket(ep.protocol().family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    throw Error(ErrorCode::System, std::string("cannot create the root listener socket: ") + std::strerror(errno));
  // Bound with SO_REUSEADDR but not listening: a rank 0 in another process
  // (a launcher that fork+execs its ranks: the descriptor is close-on-exec)
  // can bind and listen on the port while we hold it; a program without
  // SO_REUSEADDR, or another bind to port 0, cannot take it meanwhile.
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, ep.data(), static_cast<socklen_t>(ep.size())) != 0) {
    int err = errno;
    ::close(fd);
    throw Error(ErrorCode::System, "cannot bind the root address " + toString(ep) + ": " + std::strerror(err));
  }
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  PeerAddress bound = addr;
  bound.port = ntohs(ss.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&ss)->sin_port
                                             : reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  std::lock_guard lock(mutex());
  fds()[keyOf(bound)] = fd;
  return bound;
}

std::optional<int> take(const PeerAddress& addr) {
  std::lock_guard lock(mutex());
  auto it = fds().find(keyOf(addr));
  if (it == fds().end()) return std::nullopt;
  int fd = it->second;
  fds().erase(it);
  return fd;
}

void release(const PeerAddress& addr) {
  if (auto fd = take(addr)) ::close(*fd);
}

}  // namespace tether::reserved
