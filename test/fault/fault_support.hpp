// Helpers for the fault suite: memory shared with forked ranks (timestamps of
// a kill and of each survivor's error), a monotonic clock readable across
// processes, log capture, descriptor counting, and trial counts from the
// environment (TETHER_FAULT_TRIALS selects the long mode).
#pragma once

#include <dirent.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "tether/error.hpp"
#include "tether/log.hpp"

namespace tether::fault {

// CLOCK_MONOTONIC is one clock for every process on the host.
inline std::int64_t nowUs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

// What one rank of a trial reports back through shared memory.
struct Slot {
  std::atomic<std::int64_t> eventUs{0};  // victim: when it killed itself; survivor: when its call failed
  std::atomic<int> code{-1};             // tether::ErrorCode of the failure, -1: none
  std::atomic<int> peer{-1};
};

// An anonymous MAP_SHARED mapping made before fork() is visible to the parent
// and every forked rank.
class SharedSlots {
 public:
  explicit SharedSlots(std::size_t n) : n_(n) {
    void* p = ::mmap(nullptr, bytes(), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("mmap failed");
    slots_ = new (p) Slot[n];
  }
  ~SharedSlots() { ::munmap(slots_, bytes()); }
  SharedSlots(const SharedSlots&) = delete;
  SharedSlots& operator=(const SharedSlots&) = delete;
  Slot& operator[](std::size_t i) { return slots_[i]; }

 private:
  std::size_t bytes() const { return sizeof(Slot) * n_; }
  std::size_t n_;
  Slot* slots_;
};

inline int envInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

// Number of open descriptors of this process.
inline int openFdCount() {
  int n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) return -1;
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') ++n;
  ::closedir(d);
  return n - 1;  // the directory stream's own descriptor
}

// The RLIMIT_NOFILE under which this process can open exactly `more`
// descriptors (the kernel gives the lowest free number; one open above the
// limit, e.g. inherited from the shell, stays usable and takes no place).
inline rlim_t roomFor(int more) {
  DIR* dir = ::opendir("/proc/self/fd");
  if (!dir) throw std::runtime_error("/proc/self/fd cannot be read");
  std::vector<bool> open;
  while (dirent* e = ::readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    const auto fd = static_cast<std::size_t>(std::atoi(e->d_name));
    if (fd >= open.size()) open.resize(fd + 1);
    open[fd] = true;
  }
  ::closedir(dir);
  std::size_t fd = 0;
  for (int free = 0;; ++fd)
    if ((fd >= open.size() || !open[fd]) && ++free == more) break;
  return static_cast<rlim_t>(fd + 1);
}

// Collects tether's log lines for the lifetime of the object.
class LogCapture {
 public:
  LogCapture() {
    setLogLevel(LogLevel::Warn);
    setLogHandler([this](LogLevel, const std::string& line) {
      std::lock_guard lock(mutex_);
      lines_.push_back(line);
    });
  }
  ~LogCapture() { setLogHandler(nullptr); }
  std::vector<std::string> lines() const {
    std::lock_guard lock(mutex_);
    return lines_;
  }
  // The first line containing every one of `parts`, or "".
  std::string find(const std::vector<std::string>& parts) const {
    for (const auto& l : lines()) {
      bool all = true;
      for (const auto& p : parts) all = all && l.find(p) != std::string::npos;
      if (all) return l;
    }
    return "";
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> lines_;
};

}  // namespace tether::fault
