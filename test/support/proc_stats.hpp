// What this process holds, read from /proc: the socket count the benchmarks
// report and the tests bound (tether-bench, tcp-floor, scale, nvshmem-uid),
// and its memory (memory, p2p-window).
#pragma once

#include <dirent.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

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

// Kilobytes of a line of /proc/self/status ("VmHWM:", "VmRSS:"); -1 if absent.
inline long statusKb(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field, 0) == 0) return std::strtol(line.c_str() + std::strlen(field), nullptr, 10);
  return -1;
}

// Resets the peak resident size (VmHWM) to the current one.
inline void resetPeak() { std::ofstream("/proc/self/clear_refs") << "5"; }

}  // namespace tether::test
