// chaos_proxy.cpp — lifecycle, accepting, and the order in which accepted
// connections reach the target (hold, shuffle, sequential connect).
#include "chaos_proxy.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "chaos_state.hpp"

namespace tether::chaos {

std::uint64_t mixSeed(std::uint64_t seed, std::uint64_t stream) {
  std::uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (stream + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::uint32_t pick(std::mt19937_64& rng, Range range) {
  if (range.max <= range.min) return range.max;
  return std::uniform_int_distribution<std::uint32_t>(range.min, range.max)(rng);
}

std::pair<std::string, std::uint16_t> splitHostPort(const std::string& hostPort) {
  auto colon = hostPort.rfind(':');
  if (colon == std::string::npos || colon + 1 == hostPort.size()) {
    throw std::invalid_argument("expected host:port, got '" + hostPort + "'");
  }
  std::string host = hostPort.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  unsigned long port = 0;
  try {
    std::size_t used = 0;
    port = std::stoul(hostPort.substr(colon + 1), &used);
    if (used != hostPort.size() - colon - 1) throw std::invalid_argument("trailing characters");
  } catch (const std::exception&) {
    throw std::invalid_argument("bad port in '" + hostPort + "'");
  }
  if (port > 65535) throw std::invalid_argument("port out of range in '" + hostPort + "'");
  return {host, static_cast<std::uint16_t>(port)};
}

namespace {
tcp::endpoint toEndpoint(const std::string& hostPort) {
  auto [host, port] = splitHostPort(hostPort);
  return tcp::endpoint(asio::ip::make_address(host), port);
}

std::string toText(const tcp::endpoint& ep) {
  auto addr = ep.address();
  std::string host = addr.is_v6() ? "[" + addr.to_string() + "]" : addr.to_string();
  return host + ":" + std::to_string(ep.port());
}
}  // namespace

void ChaosProxy::State::acceptNext() {
  acceptor.async_accept([self = shared_from_this()](const boost::system::error_code& ec, tcp::socket socket) {
    if (ec) {
      if (self->closing || ec == asio::error::operation_aborted) return;
      self->acceptNext();  // e.g. EMFILE on one connection: keep serving the rest
      return;
    }
    self->counters.accepted++;
    auto id = self->nextConnection++;
    auto session = std::make_shared<Session>(*self, std::move(socket), id);
    self->live[id] = session;
    session->begin();
    self->acceptNext();
  });
}

void ChaosProxy::State::ready(std::shared_ptr<Session> session) {
  if (closing) return;
  if (!options.shuffleAccepts) {
    connectQueue.push_back(std::move(session));
    connectNext();
    return;
  }
  pool.push_back(std::move(session));
  if (pool.size() >= std::max<std::uint32_t>(1, options.shuffleBatch)) {
    releasePool();
    return;
  }
  if (!windowArmed) {
    windowArmed = true;
    if (!windowTimer) windowTimer.emplace(io);
    windowTimer->expires_after(std::chrono::milliseconds(options.shuffleWindowMs));
    windowTimer->async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (ec || self->closing) return;
      self->releasePool();
    });
  }
}

void ChaosProxy::State::releasePool() {
  if (windowArmed) {
    windowArmed = false;
    windowTimer->cancel();
  }
  if (pool.empty()) return;
  std::vector<std::size_t> order(pool.size());
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(mixSeed(options.seed ^ 0x5348554646ULL, nextBatch++));
  std::shuffle(order.begin(), order.end(), rng);
  counters.batches++;
  if (!std::is_sorted(order.begin(), order.end())) counters.reorderedBatches++;
  for (auto index : order) connectQueue.push_back(std::move(pool[index]));
  pool.clear();
  connectNext();
}

void ChaosProxy::State::connectNext() {
  if (connecting || closing || !target) return;
  while (!connectQueue.empty() && connectQueue.front()->closed()) connectQueue.pop_front();
  if (connectQueue.empty()) return;
  auto session = std::move(connectQueue.front());
  connectQueue.pop_front();
  connecting = true;
  session->connectUpstream(*target, [self = shared_from_this()] {
    self->connecting = false;
    self->connectNext();
  });
}

void ChaosProxy::State::closeAll() {
  closing = true;
  boost::system::error_code ignored;
  acceptor.close(ignored);
  if (windowTimer) windowTimer->cancel();
  if (drainTimer) drainTimer->cancel();
  auto sessions = live;  // close() erases from `live`
  for (auto& [id, weak] : sessions) {
    if (auto session = weak.lock()) session->close();
  }
  pool.clear();
  connectQueue.clear();
  work.reset();
}

ChaosProxy::ChaosProxy(ChaosOptions options) : state_(std::make_shared<State>(options)) {}

ChaosProxy::~ChaosProxy() { stop(); }

void ChaosProxy::start(const std::string& target, const std::string& listen) {
  if (state_->running) throw std::logic_error("ChaosProxy::start called twice");
  if (!target.empty()) state_->target = toEndpoint(target);
  auto listenAt = toEndpoint(listen);
  auto& acceptor = state_->acceptor;
  acceptor.open(listenAt.protocol());
  acceptor.set_option(tcp::acceptor::reuse_address(true));
  acceptor.bind(listenAt);
  acceptor.listen(asio::socket_base::max_listen_connections);
  auto bound = acceptor.local_endpoint();
  state_->listenPort = bound.port();
  state_->endpointText = toText(bound);
  state_->work.emplace(state_->io.get_executor());
  state_->acceptNext();
  state_->running = true;
  state_->thread = std::thread([state = state_] { state->io.run(); });
}

void ChaosProxy::setTarget(const std::string& target) {
  auto endpoint = toEndpoint(target);
  asio::post(state_->io, [state = state_, endpoint] {
    state->target = endpoint;
    state->connectNext();
  });
}

void ChaosProxy::State::drainThenClose(std::chrono::steady_clock::time_point deadline, bool quietOnce) {
  boost::system::error_code ignored;
  acceptor.close(ignored);
  bool quiet = busyPumps == 0;
  if ((quiet && quietOnce) || std::chrono::steady_clock::now() >= deadline) {
    closeAll();
    return;
  }
  if (!drainTimer) drainTimer.emplace(io);
  drainTimer->expires_after(std::chrono::milliseconds(5));
  drainTimer->async_wait([self = shared_from_this(), deadline, quiet](const boost::system::error_code&) {
    self->drainThenClose(deadline, quiet);
  });
}

void ChaosProxy::stop(std::chrono::milliseconds drain) {
  if (!state_->running) return;
  state_->running = false;
  auto deadline = std::chrono::steady_clock::now() + drain;
  asio::post(state_->io, [state = state_, deadline] { state->drainThenClose(deadline); });
  state_->thread.join();
}

std::string ChaosProxy::endpoint() const { return state_->endpointText; }
std::uint16_t ChaosProxy::port() const { return state_->listenPort; }
const ChaosOptions& ChaosProxy::options() const { return state_->options; }

ChaosStats ChaosProxy::stats() const {
  const auto& c = state_->counters;
  ChaosStats s;
  s.accepted = c.accepted;
  s.connectedUpstream = c.connectedUpstream;
  s.failedUpstream = c.failedUpstream;
  s.held = c.held;
  s.batches = c.batches;
  s.reorderedBatches = c.reorderedBatches;
  s.pieces = c.pieces;
  s.bytes = c.bytes;
  s.delayedPieces = c.delayedPieces;
  s.stalls = c.stalls;
  return s;
}

}  // namespace tether::chaos
