#include "core/await_watch.hpp"

#include <algorithm>

namespace tether {

AwaitWatch::AwaitWatch(boost::asio::io_context& io, std::function<void(int)> check)
    : timer_(io), check_(std::move(check)) {}

void AwaitWatch::note(int peer) {
  if (std::find(noted_.begin(), noted_.end(), peer) == noted_.end()) noted_.push_back(peer);
  if (armed_) return;
  armed_ = true;
  timer_.expires_after(kAfter);
  timer_.async_wait([this](boost::system::error_code ec) {
    armed_ = false;
    if (ec) return;
    checking_.swap(noted_);
    noted_.clear();
    for (int p : checking_) check_(p);
    checking_.clear();
  });
}

}  // namespace tether
