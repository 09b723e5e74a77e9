#include "coll/select.hpp"

#include <atomic>
#include <mutex>
#include <string>

#include "tether/detail/coll/settings.hpp"
#include "tether/error.hpp"

namespace tether::coll {
namespace {

// The process-wide settings: the TETHER_ALGO of the first bootstrap that
// started (its configuration, read once), else the environment at the first
// collective.
std::once_flag g_once;
dc::Settings g_settings;
// Set once g_once has run: a call reads the settings without std::call_once,
// which in libstdc++ costs four thread-local accesses and a pthread_once each
// time (before the choice was kept, 10 reads per all-gather did).
std::atomic<bool> g_ready{false};

}  // namespace

const dc::Settings& settings() {
  if (!g_ready.load(std::memory_order_acquire)) {
    std::call_once(g_once, [] { g_settings = dc::loadSettings(); });
    g_ready.store(true, std::memory_order_release);
  }
  return g_settings;
}

void checkSettings(const std::optional<std::string>& text, std::string_view who) {
  dc::Settings parsed;
  try {
    parsed = dc::parseAlgo(text ? text->c_str() : nullptr);
  } catch (const Error& e) {
    throw Error(e.code(), std::string(who) + e.what());
  }
  std::call_once(g_once, [&] { g_settings = std::move(parsed); });
  g_ready.store(true, std::memory_order_release);
}

std::string planSettings() { return dc::describe(settings()); }

}  // namespace tether::coll
