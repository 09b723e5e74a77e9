// chaos_session.cpp — one proxied connection: hold, connect upstream, and two
// pumps that cut, delay and stall each direction without ever losing,
// duplicating or reordering a byte.
#include <algorithm>

#include "chaos_state.hpp"

namespace tether::chaos {

namespace {
constexpr std::size_t kReadChunk = 64 * 1024;
}

Session::Session(ChaosProxy::State& state, tcp::socket client, std::uint64_t id)
    : state_(state),
      client_(std::move(client)),
      upstream_(state.io),
      id_(id),
      holdRng_(mixSeed(state.options.seed, id * 3)),
      holdTimer_(state.io),
      toTarget_{&client_, &upstream_, {}, 0, 0, std::mt19937_64(mixSeed(state.options.seed, id * 3 + 1)), {}, false},
      toClient_{&upstream_, &client_, {}, 0, 0, std::mt19937_64(mixSeed(state.options.seed, id * 3 + 2)), {}, false} {}

void Session::begin() {
  const auto& opts = state_.options;
  if (!opts.holdNewConnMs.enabled()) {
    state_.ready(shared_from_this());
    return;
  }
  state_.counters.held++;
  holdTimer_.expires_after(std::chrono::milliseconds(pick(holdRng_, opts.holdNewConnMs)));
  holdTimer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (ec || self->closed_) return;
    self->state_.ready(self);
  });
}

void Session::connectUpstream(const tcp::endpoint& target, std::function<void()> done) {
  upstream_.async_connect(target,
                          [self = shared_from_this(), done = std::move(done)](const boost::system::error_code& ec) {
                            if (ec) {
                              if (!self->closed_) {
                                self->state_.counters.failedUpstream++;
                                self->close();  // the client sees its connection end, as if refused
                              }
                            } else {
                              self->state_.counters.connectedUpstream++;
                              boost::system::error_code ignored;
                              // Pieces must leave as separate segments, not be coalesced by Nagle.
                              self->upstream_.set_option(tcp::no_delay(true), ignored);
                              self->client_.set_option(tcp::no_delay(true), ignored);
                              if (!self->closed_) self->startPumps();
                            }
                            done();
                          });
}

void Session::startPumps() {
  for (Pump* pump : {&toTarget_, &toClient_}) {
    pump->buffer.resize(kReadChunk);
    pump->timer.emplace(state_.io);
    readMore(*pump);
  }
}

void Session::readMore(Pump& pump) {
  pump.from->async_read_some(asio::buffer(pump.buffer),
                             [self = shared_from_this(), &pump](const boost::system::error_code& ec, std::size_t n) {
                               if (self->closed_) return;
                               if (ec) {
                                 // End of stream or reset: everything read so far has been forwarded
                                 // (reads wait for the previous chunk), so pass the end on gracefully.
                                 self->pumpFinished(pump, true);
                                 return;
                               }
                               pump.filled = n;
                               pump.sent = 0;
                               self->state_.busyPumps++;
                               self->forwardPiece(pump);
                             });
}

void Session::forwardPiece(Pump& pump) {
  if (pump.sent == pump.filled) {
    state_.busyPumps--;
    readMore(pump);
    return;
  }
  const auto& opts = state_.options;
  std::size_t remaining = pump.filled - pump.sent;
  std::size_t piece = remaining;
  if (opts.fragmentBytes.enabled()) {
    piece = std::min<std::size_t>(remaining, std::max<std::uint32_t>(1, pick(pump.rng, opts.fragmentBytes)));
  }
  std::chrono::microseconds wait{0};
  if (opts.delayPiecesUs.enabled()) {
    wait += std::chrono::microseconds(pick(pump.rng, opts.delayPiecesUs));
    state_.counters.delayedPieces++;
  }
  if (opts.stallProbability > 0.0 &&
      std::uniform_real_distribution<double>(0.0, 1.0)(pump.rng) < opts.stallProbability) {
    wait += std::chrono::milliseconds(pick(pump.rng, opts.stallMs));
    state_.counters.stalls++;
  }
  if (wait.count() == 0) {
    writePiece(pump, piece);
    return;
  }
  pump.timer->expires_after(wait);
  pump.timer->async_wait([self = shared_from_this(), &pump, piece](const boost::system::error_code& ec) {
    if (ec || self->closed_) return;
    self->writePiece(pump, piece);
  });
}

void Session::writePiece(Pump& pump, std::size_t bytes) {
  // Counted when issued, so a peer that holds the bytes always sees them counted.
  state_.counters.pieces++;
  state_.counters.bytes += bytes;
  asio::async_write(*pump.to, asio::buffer(pump.buffer.data() + pump.sent, bytes),
                    [self = shared_from_this(), &pump](const boost::system::error_code& ec, std::size_t n) {
                      if (self->closed_) return;
                      if (ec) {
                        // The receiving side is gone: stop this direction only, so the other
                        // one still delivers what it already holds.
                        self->state_.busyPumps--;
                        pump.filled = pump.sent = 0;
                        self->pumpFinished(pump, false);
                        return;
                      }
                      pump.sent += n;
                      self->forwardPiece(pump);
                    });
}

void Session::pumpFinished(Pump& pump, bool passEndOn) {
  if (pump.finished) return;
  pump.finished = true;
  boost::system::error_code ignored;
  // Half-close: the other side sees end-of-stream exactly where the sender closed.
  if (passEndOn) pump.to->shutdown(tcp::socket::shutdown_send, ignored);
  if (toTarget_.finished && toClient_.finished) close();
}

void Session::close() {
  if (closed_) return;
  closed_ = true;
  boost::system::error_code ignored;
  holdTimer_.cancel();
  for (Pump* pump : {&toTarget_, &toClient_}) {
    if (pump->timer) pump->timer->cancel();
    if (pump->sent < pump->filled) state_.busyPumps--;  // dropped, no longer held
    pump->filled = pump->sent = 0;
  }
  client_.close(ignored);
  upstream_.close(ignored);
  state_.live.erase(id_);
}

}  // namespace tether::chaos
