// C ABI: last error per thread, result names, version, logging.
#include <cstring>
#include <string>

#include "capi/guard.hpp"
#include "tether/log.hpp"
#include "tether/tether.h"

namespace tether::capi {
namespace {

thread_local std::string lastMessage;
// Points into lastMessage, or at a literal when storing the message failed.
thread_local const char* lastError = "";

}  // namespace

tether_result_t fail(tether_result_t result, const char* message) noexcept {
  try {
    lastMessage = message;
    lastError = lastMessage.c_str();
  } catch (...) {
    lastError = "out of memory (while storing an error message)";
  }
  return result;
}

tether_result_t fail(tether_result_t result, const std::string& message) noexcept {
  return fail(result, message.c_str());
}

void invalid(const std::string& message) { throw Error(ErrorCode::InvalidArgument, message); }

// A C enum may hold any int; C++ may not load one outside the enumerators'
// range, so the value is read as the int it is.
template <class Enum>
int asInt(const Enum& value) {
  static_assert(sizeof(Enum) == sizeof(int), "C enums are ints here");
  int i;
  std::memcpy(&i, &value, sizeof i);
  return i;
}

}  // namespace tether::capi

using namespace tether::capi;

extern "C" {

const char* tether_last_error(void) { return lastError; }

const char* tether_result_string(tether_result_t result) {
  switch (asInt(result)) {
    case TETHER_SUCCESS:
      return "TETHER_SUCCESS";
    case TETHER_ERR_TIMEOUT:
      return "TETHER_ERR_TIMEOUT";
    case TETHER_ERR_ABORTED:
      return "TETHER_ERR_ABORTED";
    case TETHER_ERR_PEER_LOST:
      return "TETHER_ERR_PEER_LOST";
    case TETHER_ERR_PROTOCOL:
      return "TETHER_ERR_PROTOCOL";
    case TETHER_ERR_INVALID_ARGUMENT:
      return "TETHER_ERR_INVALID_ARGUMENT";
    case TETHER_ERR_SYSTEM:
      return "TETHER_ERR_SYSTEM";
  }
  return "TETHER_ERR_UNKNOWN";
}

int tether_version(void) { return TETHER_VERSION; }

const char* tether_version_string(void) { return TETHER_VERSION_STRING; }

tether_result_t tether_set_log_level(tether_log_level_t level) {
  return guarded("tether_set_log_level", [&] {
    int value = asInt(level);
    if (value < TETHER_LOG_NONE || value > TETHER_LOG_TRACE)
      invalid("tether_set_log_level: level " + std::to_string(value) + " is not a tether_log_level_t");
    tether::setLogLevel(static_cast<tether::LogLevel>(value));
  });
}

tether_result_t tether_set_log_handler(tether_log_fn handler, void* context) {
  return guarded("tether_set_log_handler", [&] {
    if (!handler) return tether::setLogHandler(nullptr);
    tether::setLogHandler([handler, context](tether::LogLevel level, const std::string& line) {
      handler(static_cast<tether_log_level_t>(level), line.c_str(), context);
    });
  });
}

}  // extern "C"
