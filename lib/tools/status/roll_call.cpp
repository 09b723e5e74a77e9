#include "roll_call.hpp"

#include <fmt/format.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <algorithm>
#include <memory>

#include "base/bytes.hpp"
#include "base/endpoint.hpp"
#include "link/connector.hpp"
#include "link/frame_io.hpp"
#include "link/observer.hpp"
#include "link/tcp_stream.hpp"

namespace tether::status {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

const char* stateName(RankReport::State s) {
  switch (s) {
    case RankReport::State::Alive:
      return "alive";
    case RankReport::State::NoAnswer:
      return "no answer";
    case RankReport::State::Lost:
      return "lost";
  }
  return "?";
}

namespace {

// Tables of up to a few million ranks.
constexpr std::uint64_t kMaxTableBytes = 64ULL << 20;

struct Asker {
  asio::io_context& io;
  const Job& job;
  std::chrono::milliseconds timeout;
  link::TcpDialer dialer{io, link::TcpOptions{}};
};

// One observer session with `rank` at `at`: the handshake, then the table
// (when `table` is given) and the status. Fills `out`.
asio::awaitable<void> ask(Asker& a, int rank, PeerAddress at, RankReport& out, std::optional<wire::Bytes>* table) {
  out.rank = rank;
  out.address = toString(toEndpoint(at));
  auto s = a.dialer.open();
  auto expired = std::make_shared<bool>(false);
  bool connected = false;
  asio::steady_timer deadline(a.io, a.timeout);
  deadline.async_wait([s, expired](boost::system::error_code ec) {
    if (ec) return;
    *expired = true;
    s->close();
  });
  try {
    co_await s->connect(link::tcpEndpoint(at));
    connected = true;
    co_await link::observerHandshake(*s, a.job.secret, a.job.worldId, static_cast<std::uint32_t>(rank));
    if (table) {
      const wire::Bytes none;  // no temporaries in a co_await's full-expression (observer_desk.cpp says why)
      co_await link::writeFrame(*s, wire::Kind::TableQuery, none);
      auto f = co_await link::readFrame(*s, kMaxTableBytes);
      if (f.header.kind == wire::Kind::Reject)
        throw std::runtime_error(link::rejectText(wire::decodeReject(f.payload)));
      if (f.header.kind != wire::Kind::Table)
        throw std::runtime_error(fmt::format("answered a table query with a {} frame", wire::kindName(f.header.kind)));
      *table = std::move(f.payload);
    }
    const auto query = wire::encode(wire::StatusQuery{1, 0, 0});
    co_await link::writeFrame(*s, wire::Kind::StatusQuery, query);
    auto f = co_await link::readFrame(*s, wire::kMaxControlPayload);
    if (f.header.kind != wire::Kind::StatusAnswer)
      throw std::runtime_error(fmt::format("answered a status query with a {} frame", wire::kindName(f.header.kind)));
    out.answer = wire::decodeStatusAnswer(f.payload);
    out.state = RankReport::State::Alive;
  } catch (const boost::system::system_error& e) {
    if (*expired) {
      out.state = RankReport::State::NoAnswer;
      out.why = connected ? fmt::format("connected, but no answer within {} ms (stopped, or not making progress)",
                                        a.timeout.count())
                          : fmt::format("no connection within {} ms", a.timeout.count());
    } else {
      // Refused, reset, unreachable: no process listens there any more.
      out.state = RankReport::State::Lost;
      out.why = e.code().message();
    }
  } catch (const std::exception& e) {
    out.state = *expired ? RankReport::State::NoAnswer : RankReport::State::Lost;
    out.why = e.what();
  }
  deadline.cancel();
  s->close();
}

}  // namespace

RollCall rollCall(const Job& job, std::chrono::milliseconds timeout, int parallel) {
  const auto began = Clock::now();
  asio::io_context io(1);
  Asker a{io, job, timeout};
  RollCall rc;
  rc.root = toString(toEndpoint(job.root));
  RankReport root;
  std::optional<wire::Bytes> table;
  asio::co_spawn(io, ask(a, 0, job.root, root, &table), asio::detached);
  io.run();
  if (root.state != RankReport::State::Alive || !table) {
    std::string why = root.state == RankReport::State::Lost && root.why.find("refused") != std::string::npos
                          ? root.why + " (is the job running, and is this its root address?)"
                          : root.why;
    throw CannotAsk(fmt::format("rank 0 at {} {}: {}; only rank 0 knows the other ranks' addresses", rc.root,
                                root.state == RankReport::State::NoAnswer ? "did not answer" : "cannot be asked", why));
  }
  if (table->size() < 4) throw CannotAsk("rank 0 sent an empty address table");
  const auto n = le::load<std::uint32_t>(table->data());
  std::vector<PeerAddress> addresses;
  try {
    addresses = wire::decodeTable(*table, n);
  } catch (const std::exception& e) {
    throw CannotAsk(fmt::format("rank 0 sent a malformed address table: {}", e.what()));
  }
  rc.ranks.resize(addresses.size());
  rc.ranks[0] = std::move(root);
  // Workers take the next rank until none is left: at most `parallel` sessions at once.
  std::size_t next = 1;
  auto worker = [&]() -> asio::awaitable<void> {
    while (next < addresses.size()) {
      const std::size_t r = next++;
      co_await ask(a, static_cast<int>(r), addresses[r], rc.ranks[r], nullptr);
    }
  };
  const int workers = std::max(1, std::min<int>(parallel, static_cast<int>(addresses.size())));
  for (int i = 0; i < workers; ++i) asio::co_spawn(io, worker(), asio::detached);
  io.restart();
  io.run();
  rc.elapsedMs = std::chrono::duration<double, std::milli>(Clock::now() - began).count();
  return rc;
}

}  // namespace tether::status
