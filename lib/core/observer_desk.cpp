#include "core/observer_desk.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>

#include "base/log.hpp"
#include "link/frame_io.hpp"

namespace tether {

namespace asio = boost::asio;

void ObserverDesk::serve(std::shared_ptr<link::Stream> stream) {
  if (static_cast<int>(open_.size()) >= kMaxSessions) {
    log::info(rank_, "observer from {} closed unanswered: {} observers are being answered", stream->peer(),
              open_.size());
    stream->close();
    return;
  }
  open_.insert(stream);
  asio::co_spawn(io_, session(std::move(stream)), asio::detached);
}

void ObserverDesk::closeAll() {
  for (const auto& s : open_) s->close();
}

asio::awaitable<void> ObserverDesk::session(std::shared_ptr<link::Stream> s) {
  asio::steady_timer deadline(io_, deadline_);
  deadline.async_wait([s](boost::system::error_code ec) {
    if (!ec) s->close();
  });
  try {
    for (int asked = 0; asked < kMaxQuestions; ++asked) {
      // Every answer is a named local before the co_await: GCC 12 may
      // destroy a temporary of a co_await's full-expression twice (seen as a
      // double free with an aggregate temporary here).
      auto f = co_await link::readFrame(*s, wire::kMaxControlPayload);
      wire::Kind kind = wire::Kind::StatusAnswer;
      wire::Bytes answer;
      if (f.header.kind == wire::Kind::StatusQuery) {
        answer = wire::encode(answers_.status(wire::decodeStatusQuery(f.payload)));
      } else if (f.header.kind == wire::Kind::TableQuery) {
        auto table = answers_.table();
        kind = table ? wire::Kind::Table : wire::Kind::Reject;
        if (table) {
          answer = std::move(*table);
        } else {
          const wire::Reject notYet{wire::RejectCode::NotJoined, "the rendezvous has not finished here"};
          answer = wire::encode(notYet);
        }
      } else {
        log::warn(rank_, "observer from {} sent a {} frame; closing it", s->peer(), wire::kindName(f.header.kind));
        break;
      }
      co_await link::writeFrame(*s, kind, answer);
    }
  } catch (const std::exception& e) {
    // The observer closed (EOF) after its questions, or the deadline did.
    log::trace(rank_, "observer from {} done: {}", s->peer(), e.what());
  }
  deadline.cancel();
  s->close();
  open_.erase(s);
}

}  // namespace tether
