#include "match/mailbox.hpp"

#include <utility>

namespace tether::match {

bool Mailbox::stash(const Key& k, Stashed f) {
  return detail::match::Mailbox<Key, KeyHash, Posted, Stashed>::stash(k, std::move(f),
                                                                      k.kind == wire::Kind::Collective);
}

}  // namespace tether::match
