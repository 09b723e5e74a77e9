// A send or a receive driven without a coroutine (OpRun): on the progress
// thread it queues the frame (a send, referencing the caller's buffer) or
// posts the receive, waits until that is done, and ends. A communicator
// keeps one for its sends and one for its receives (with their op and
// completion, ReusedCall), so a steady-state blocking send or receive
// allocates nothing.
#pragma once

#include <cstddef>
#include <memory>

#include "base/layer.hpp"
#include "core/op_run.hpp"
#include "match/key.hpp"
#include "wire/frame.hpp"

TETHER_LAYER(6, "core");

namespace tether {

class PointRun final : public OpRun, public std::enable_shared_from_this<PointRun> {
 public:
  // Starts `op` (a send) queueing frame `h` with payload `data` to world
  // rank `dst`; `done` completes when it ends. Throws as Calls::startRun does.
  void startSend(Calls& calls, std::shared_ptr<Op> op, std::shared_ptr<Completion> done, int dst,
                 const wire::FrameHeader& h, const void* data);
  // Starts `op` (a receive) posting a receive of `bytes` into `data` under `key`.
  void startRecv(Calls& calls, std::shared_ptr<Op> op, std::shared_ptr<Completion> done, const match::Key& key,
                 void* data, std::size_t bytes);

 private:
  void begin() override {}
  bool next() override;

  bool send_ = false;
  bool posted_ = false;
  int dst_ = -1;
  wire::FrameHeader header_;
  match::Key key_{};
  const void* in_ = nullptr;
  void* out_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace tether
