// The TCP world's mailbox: the shared matching (tether/detail/match/
// mailbox.hpp) under the frame's full key (key.hpp), for receives posted
// with the caller's buffer and frames kept with their header. Used only on
// the progress thread; no locks.
#pragma once

#include <vector>

#include "base/layer.hpp"
#include "match/key.hpp"
#include "tether/detail/match/mailbox.hpp"
#include "wire/frame.hpp"

TETHER_LAYER(2, "match");

namespace tether::match {

struct Posted {
  void* buf = nullptr;
  std::size_t len = 0;
  const void* owner = nullptr;  // the operation waiting on it
};

struct Stashed {
  wire::FrameHeader header;
  std::vector<unsigned char> payload;
};

class Mailbox : public detail::match::Mailbox<Key, KeyHash, Posted, Stashed> {
 public:
  // Returns false (and keeps nothing) if a collective frame with this exact key
  // is already waiting: a duplicate.
  bool stash(const Key& k, Stashed f);
};

}  // namespace tether::match
