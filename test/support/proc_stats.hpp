// What this process holds, read from /proc: the socket count the benchmarks
// report and the tests bound (tether-bench, tcp-floor, scale, nvshmem-uid),
// and its memory (memory, p2p-window, collective-window).
#pragma once

#include <dirent.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>

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

// A counter that forked ranks share: made before the fork, never unmapped.
inline std::atomic<std::int64_t>* sharedCounter() {
  void* p =
      ::mmap(nullptr, sizeof(std::atomic<std::int64_t>), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::runtime_error("mmap of a shared counter failed");
  return new (p) std::atomic<std::int64_t>(0);
}

// How much this process's peak resident size grew (KiB) while another rank
// ran ahead of it: until `progress` reached `all`, or for `most`, and 200 ms
// more for what was on the way.
inline long peakGrowthWhile(const std::atomic<std::int64_t>& progress, std::int64_t all,
                            std::chrono::milliseconds most) {
  resetPeak();
  const long before = statusKb("VmHWM:");
  const auto until = std::chrono::steady_clock::now() + most;
  while (progress.load() < all && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  return statusKb("VmHWM:") - before;
}

}  // namespace tether::test
