// The C ABI's error plumbing: every exported function runs its body through
// guarded(), which turns any exception into a tether_result_t and the calling
// thread's last-error message. Nothing is thrown across the boundary.
#pragma once

#include <new>
#include <string>

#include "base/layer.hpp"
#include "tether/error.hpp"
#include "tether/tether.h"

TETHER_LAYER(8, "capi");

struct tether_comm;

namespace tether::capi {

// Stores `message` as this thread's last error and returns `result`. Never throws.
tether_result_t fail(tether_result_t result, const char* message) noexcept;
tether_result_t fail(tether_result_t result, const std::string& message) noexcept;

// What an invalid argument throws inside a guarded body.
[[noreturn]] void invalid(const std::string& message);

inline tether_result_t toResult(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::Timeout:
      return TETHER_ERR_TIMEOUT;
    case ErrorCode::Aborted:
      return TETHER_ERR_ABORTED;
    case ErrorCode::PeerLost:
      return TETHER_ERR_PEER_LOST;
    case ErrorCode::Protocol:
      return TETHER_ERR_PROTOCOL;
    case ErrorCode::InvalidArgument:
      return TETHER_ERR_INVALID_ARGUMENT;
    case ErrorCode::System:
      return TETHER_ERR_SYSTEM;
  }
  return TETHER_ERR_SYSTEM;
}

// Runs `body`; `function` names the C entry point in messages that tether's
// own errors would not name (out of memory, foreign exceptions).
template <class Body>
tether_result_t guarded(const char* function, Body&& body) noexcept {
  try {
    body();
    return TETHER_SUCCESS;
  } catch (const Error& e) {
    return fail(toResult(e.code()), e.what());
  } catch (const std::bad_alloc&) {
    return fail(TETHER_ERR_SYSTEM, std::string(function) + ": out of memory");
  } catch (const std::exception& e) {
    return fail(TETHER_ERR_SYSTEM, std::string(function) + ": unexpected exception: " + e.what());
  } catch (...) {
    return fail(TETHER_ERR_SYSTEM, std::string(function) + ": unexpected exception");
  }
}

// Throws InvalidArgument naming `function` and `what` when `p` is null.
template <class T>
T* require(T* p, const char* function, const char* what) {
  if (!p) invalid(std::string(function) + ": " + what + " is NULL");
  return p;
}

}  // namespace tether::capi
