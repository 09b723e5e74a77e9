// PointRun (point_run.hpp): a send's or a receive's one post and one wait.
#include "core/point_run.hpp"

#include <utility>

#include "core/calls.hpp"

namespace tether {

void PointRun::startSend(Calls& calls, std::shared_ptr<Op> op, std::shared_ptr<Completion> done, int dst,
                         const wire::FrameHeader& h, const void* data) {
  send_ = true;
  posted_ = false;
  dst_ = dst;
  header_ = h;
  in_ = data;
  launch(calls, std::move(op), std::move(done), shared_from_this());
}

void PointRun::startRecv(Calls& calls, std::shared_ptr<Op> op, std::shared_ptr<Completion> done, const match::Key& key,
                         void* data, std::size_t bytes) {
  send_ = false;
  posted_ = false;
  key_ = key;
  out_ = data;
  bytes_ = bytes;
  launch(calls, std::move(op), std::move(done), shared_from_this());
}

bool PointRun::next() {
  if (posted_) return false;
  posted_ = true;
  if (send_)
    calls_->sendFrame(*op_, dst_, header_, in_, /*reference=*/true);
  else
    calls_->postRecv(*op_, key_, out_, bytes_);
  return true;
}

}  // namespace tether
