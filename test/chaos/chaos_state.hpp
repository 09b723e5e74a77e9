// chaos_state.hpp — the proxy's inner parts, shared by chaos_proxy.cpp and
// chaos_session.cpp. Everything here runs on the proxy's one io thread except
// the atomic counters, which stats() reads from anywhere.
#pragma once

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include <boost/asio.hpp>

#include "chaos_proxy.hpp"

namespace tether::chaos {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

// splitmix64: turns (seed, stream number) into independent generator seeds.
std::uint64_t mixSeed(std::uint64_t seed, std::uint64_t stream);
std::uint32_t pick(std::mt19937_64& rng, Range range);

class Session;

struct Counters {
  std::atomic<std::uint64_t> accepted{0}, connectedUpstream{0}, failedUpstream{0}, held{0}, batches{0},
      reorderedBatches{0}, pieces{0}, bytes{0}, delayedPieces{0}, stalls{0};
};

struct ChaosProxy::State : std::enable_shared_from_this<ChaosProxy::State> {
  explicit State(ChaosOptions opts) : options(opts) {}

  ChaosOptions options;
  asio::io_context io;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  tcp::acceptor acceptor{io};
  std::thread thread;
  std::string endpointText;
  std::uint16_t listenPort = 0;
  bool running = false;  // guarded by lifecycle (start/stop are not concurrent)
  Counters counters;

  // io thread only from here on.
  std::optional<tcp::endpoint> target;
  std::uint64_t nextConnection = 0;
  std::uint64_t nextBatch = 0;
  std::vector<std::shared_ptr<Session>> pool;  // waiting for the shuffle
  std::optional<asio::steady_timer> windowTimer;
  bool windowArmed = false;
  std::deque<std::shared_ptr<Session>> connectQueue;  // next to connect upstream, in order
  bool connecting = false;
  std::map<std::uint64_t, std::weak_ptr<Session>> live;
  bool closing = false;
  // Pumps holding bytes they have read but not yet written (io thread only).
  std::size_t busyPumps = 0;
  std::optional<asio::steady_timer> drainTimer;

  void acceptNext();
  // A session finished its hold: pool it for shuffling or queue it.
  void ready(std::shared_ptr<Session> session);
  void releasePool();
  // Connects queued sessions upstream one after another, so the target's
  // accept queue sees them in queue order.
  void connectNext();
  void closeAll();
  // Closes the listener now; calls closeAll once no pump holds bytes (seen
  // twice in a row) or `deadline` passes.
  void drainThenClose(std::chrono::steady_clock::time_point deadline, bool quietOnce = false);
};

// One proxied connection: client socket, upstream socket, two pumps.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(ChaosProxy::State& state, tcp::socket client, std::uint64_t id);

  std::uint64_t id() const { return id_; }
  bool closed() const { return closed_; }
  // Holds (if configured), then tells the state it is ready to connect.
  void begin();
  // Opens the upstream connection; calls `done` once it succeeded or failed.
  void connectUpstream(const tcp::endpoint& target, std::function<void()> done);
  void close();

 private:
  struct Pump {
    tcp::socket* from;
    tcp::socket* to;
    std::vector<char> buffer;
    std::size_t filled = 0;
    std::size_t sent = 0;
    std::mt19937_64 rng;
    std::optional<asio::steady_timer> timer;
    bool finished = false;
  };

  void startPumps();
  void readMore(Pump& pump);
  void forwardPiece(Pump& pump);
  void writePiece(Pump& pump, std::size_t bytes);
  void pumpFinished(Pump& pump, bool passEndOn);

  ChaosProxy::State& state_;
  tcp::socket client_;
  tcp::socket upstream_;
  std::uint64_t id_;
  std::mt19937_64 holdRng_;
  asio::steady_timer holdTimer_;
  Pump toTarget_;
  Pump toClient_;
  bool closed_ = false;
};

}  // namespace tether::chaos
