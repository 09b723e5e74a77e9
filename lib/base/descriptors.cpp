#include "base/descriptors.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

namespace tether::fds {
namespace {

// A descriptor and the file it named when opened: a number closed and reused
// since names another (device, inode), and is not touched.
struct Entry {
  int fd;
  dev_t dev;
  ino_t ino;
  const void* owner;
};

// Never destroyed: a bootstrap in a global is destroyed at exit(), possibly
// after function-local statics made later than it.
std::mutex& mutex() {
  static auto* m = new std::mutex;
  return *m;
}
std::vector<Entry>& entries() {
  static auto* v = new std::vector<Entry>;
  return *v;
}
std::size_t nextPrune = 64;
std::atomic<pid_t> cachedPid{0};

bool same(const Entry& e) {
  struct stat st {};
  return ::fstat(e.fd, &st) == 0 && st.st_dev == e.dev && st.st_ino == e.ino;
}

// The list is taken across fork(), so a child sees it whole and can use it;
// the child learns its own id.
void installForkHandlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    mutex();
    entries();
    cachedPid.store(::getpid());
    ::pthread_atfork([] { mutex().lock(); }, [] { mutex().unlock(); },
                     [] {
                       cachedPid.store(::getpid());
                       mutex().unlock();
                     });
  });
}

}  // namespace

pid_t processId() {
  if (const pid_t p = cachedPid.load(std::memory_order_relaxed)) return p;
  installForkHandlers();
  return cachedPid.load();
}

void track(int fd, const void* owner) {
  if (fd < 0 || !owner) return;
  struct stat st {};
  if (::fstat(fd, &st) != 0) return;
  installForkHandlers();
  std::lock_guard lock(mutex());
  auto& v = entries();
  // Sockets are closed without telling this list: drop the stale entries
  // whenever it has doubled (one fstat per entry, amortised).
  if (v.size() >= nextPrune) {
    v.erase(std::remove_if(v.begin(), v.end(), [](const Entry& e) { return !same(e); }), v.end());
    nextPrune = std::max<std::size_t>(64, 2 * v.size());
  }
  v.push_back({fd, st.st_dev, st.st_ino, owner});
}

int socket(int family, int type, int protocol, const void* owner) {
  int fd = ::socket(family, type | SOCK_CLOEXEC, protocol);
  track(fd, owner);
  return fd;
}

int accept(int listener, sockaddr* from, socklen_t* len, const void* owner) {
  int fd = ::accept4(listener, from, len, SOCK_CLOEXEC);
  track(fd, owner);
  return fd;
}

std::string readFile(const char* path) {
  std::string text;
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return text;
  char buf[4096];
  ssize_t got;
  while ((got = ::read(fd, buf, sizeof buf)) > 0) text.append(buf, static_cast<std::size_t>(got));
  ::close(fd);
  return text;
}

void closeInherited(const void* owner) {
  std::lock_guard lock(mutex());
  auto& v = entries();
  auto mine = std::stable_partition(v.begin(), v.end(), [owner](const Entry& e) { return e.owner != owner; });
  for (auto it = mine; it != v.end(); ++it)
    if (same(*it)) ::close(it->fd);
  v.erase(mine, v.end());
}

void forget(const void* owner) {
  std::lock_guard lock(mutex());
  auto& v = entries();
  v.erase(std::remove_if(v.begin(), v.end(), [owner](const Entry& e) { return e.owner == owner; }), v.end());
}

}  // namespace tether::fds
