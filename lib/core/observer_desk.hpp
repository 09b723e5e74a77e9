// Where an observer (tether-status, docs/troubleshooting.md "Where is every
// rank?") is answered. The connector hands over a connection that proved the
// job's secret under wire::kObserverRank (link/observer.hpp); it is never a
// link (no LinkTable entry, not in the link budget). Its questions: a
// StatusQuery (comm and coll 0: this rank as a whole, statusOfRank) and a
// TableQuery (every rank's address). Answered on the event loop like a
// peer's probe, so a rank stuck in a collective answers too; then closed, at
// the latest at the deadline. Nothing runs while nobody asks. Progress thread.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_set>

#include "base/layer.hpp"
#include "link/stream.hpp"
#include "wire/handshake.hpp"
#include "wire/notice.hpp"

TETHER_LAYER(6, "core");

namespace tether {

class ObserverDesk {
 public:
  struct Answers {
    std::function<wire::StatusAnswer(const wire::StatusQuery&)> status;
    // The encoded address table (wire::encodeTable); nullopt while the world joins.
    std::function<std::optional<wire::Bytes>()> table;
  };
  // Observers served at once; more are closed unanswered.
  static constexpr int kMaxSessions = 8;
  // Questions on one connection.
  static constexpr int kMaxQuestions = 4;

  ObserverDesk(boost::asio::io_context& io, int rank, std::chrono::milliseconds deadline, Answers answers)
      : io_(io), rank_(rank), deadline_(deadline), answers_(std::move(answers)) {}

  void serve(std::shared_ptr<link::Stream> stream);
  // The world closes: every observer's connection too.
  void closeAll();

 private:
  boost::asio::awaitable<void> session(std::shared_ptr<link::Stream> stream);

  boost::asio::io_context& io_;
  const int rank_;
  const std::chrono::milliseconds deadline_;
  Answers answers_;
  std::unordered_set<std::shared_ptr<link::Stream>> open_;
};

}  // namespace tether
