// The TCP world's mailbox, compiled once here (mailbox.hpp declares the
// instantiation extern for the layers above).
#include "match/mailbox.hpp"

template class tether::detail::match::Mailbox<tether::match::Key, tether::match::KeyHash, tether::match::Posted,
                                              tether::match::Stashed>;
