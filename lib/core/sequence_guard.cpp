#include "core/sequence_guard.hpp"

#include "base/log.hpp"

#include "tether/detail/core/failures.hpp"

namespace tether {

namespace failures = detail::core::failures;

void SequenceGuard::end(Op& op, std::exception_ptr& e, match::Mailbox& mailbox) {
  Base::end(op, e, mailbox);
  if (!e || !op.seq) return;
  op.seq->failedColl = op.coll;
  try {
    std::rethrow_exception(e);
  } catch (const Error& err) {
    op.seq->failedWhat = err.what();
    // A stall probe follows world ranks: the error names the communicator's,
    // but an abort is the world's and names its origin by world rank already.
    op.seq->failedPeer = err.code() == ErrorCode::Aborted ? err.peer() : op.seq->names.worldRank(err.peer());
  } catch (const std::exception& other) {
    op.seq->failedWhat = other.what();
    op.seq->failedPeer = -1;
  }
}

void TcpSequenceHooks::noticed(const Error& e) { log::warn(rank_, "{}", e.what()); }

}  // namespace tether
