// What this process holds, read from /proc: the socket count the benchmarks
// report and the tests bound (tether-bench, tcp-floor, scale, nvshmem-uid).
#pragma once

#include <dirent.h>
#include <sys/stat.h>

namespace tether::test {

// Sockets this process has open now (/proc/self/fd entries that are sockets); -1 if /proc cannot be read.
inline long openSockets() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  long n = 0;
  while (dirent* e = ::readdir(dir)) {
    struct stat st {};
    if (e->d_name[0] != '.' && ::fstatat(::dirfd(dir), e->d_name, &st, 0) == 0 && S_ISSOCK(st.st_mode)) ++n;
  }
  ::closedir(dir);
  return n;
}

}  // namespace tether::test
