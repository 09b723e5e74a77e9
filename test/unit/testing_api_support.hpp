// Helpers for the InProcessWorld tests: rank bodies run on threads, where
// Catch2 assertions are not thread-safe, so bodies record what they saw and
// the main thread asserts afterwards.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <tether/bootstrap.hpp>
#include <tether/error.hpp>

namespace testing_api {

// A scenario shared by the conformance suite (both worlds) and multiproc
// tests: its name, its ranks, and the body each rank runs (it throws when
// the rank sees something unexpected).
struct Case {
  const char* name;
  int nranks;
  std::function<void(tether::Bootstrap&)> body;
};

// Throws from a rank body; InProcessWorld::run rethrows it on the main thread.
inline void check(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what);
}

// The tether::Error that `call` throws; a std::runtime_error if it returns.
template <class Call>
tether::Error errorFrom(Call call) {
  try {
    call();
  } catch (const tether::Error& error) {
    return error;
  }
  throw std::runtime_error("expected a tether::Error, the call returned");
}

// A deterministic byte for (source rank, destination rank, index).
inline unsigned char pattern(int from, int to, std::size_t index) {
  return static_cast<unsigned char>(from * 31 + to * 7 + static_cast<int>(index % 251) + 1);
}

// Ranks wait here for each other with point-to-point only (works on a
// communicator whose collectives have failed; takes no collective id).
inline void p2pRendezvous(tether::Bootstrap& b, int tag) {
  int token = b.rank();
  if (b.rank() != 0) {
    b.send(&token, sizeof token, 0, tag);
    b.recv(&token, sizeof token, 0, tag);
    return;
  }
  for (int p = 1; p < b.size(); ++p) b.recv(&token, sizeof token, p, tag);
  for (int p = 1; p < b.size(); ++p) b.send(&token, sizeof token, p, tag);
}

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

const std::vector<int> kWorldSizes = {1, 2, 3, 5, 8};

}  // namespace testing_api
