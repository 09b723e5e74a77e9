// The public TcpBootstrap: argument checks (tether/detail/args.hpp, shared
// with the in-process testing world), then the communicator runs the call.
#include "tether/tcp_bootstrap.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "base/crypto.hpp"
#include "base/endpoint.hpp"
#include "base/env.hpp"
#include "base/log.hpp"
#include "base/settings.hpp"
#include "coll/select.hpp"
#include "core/communicator.hpp"
#include "core/job_identity.hpp"
#include "core/tcp_start.hpp"
#include "core/unique_id_layout.hpp"
#include "rendezvous/reserved_listener.hpp"
#include "tether/detail/args.hpp"
#include "tether/detail/coll/front.hpp"
#include "tether/detail/env_int.hpp"

namespace tether {

namespace asio = boost::asio;
namespace args = detail::args;
namespace dc = detail::coll;

namespace {

// A TcpOptions field: 0 takes `fallback` (`zero` says where it comes from);
// another value must be in [lo, hi].
std::int64_t option(int rank, const char* field, std::int64_t given, std::int64_t lo, std::int64_t hi,
                    std::int64_t fallback, const std::string& zero) {
  if (given == 0) return fallback;
  if (given < lo || given > hi)
    throw Error(
        ErrorCode::InvalidArgument,
        fmt::format("rank {}: TcpOptions::{}={} is out of range [{}, {}] (0: {})", rank, field, given, lo, hi, zero),
        rank);
  return given;
}

// A TcpOptions limit: 0 takes `variable` (else its default); another value
// must be in the variable's range.
std::int64_t limit(const settings::Values& values, int rank, const char* field, std::int64_t given,
                   const char* variable) {
  const settings::Variable& v = settings::find(variable);
  return option(rank, field, given, v.lo, v.hi, values.integer(variable), variable);
}

// Ranks on this host: TETHER_LOCAL_NRANKS, else the launcher's local size
// (LOCAL_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_SIZE, SLURM_NTASKS_PER_NODE when it
// is one number, not Slurm's "2(x3)" form); 0: unknown.
int localRanks(const settings::Values& values) {
  if (values.text("TETHER_LOCAL_NRANKS")) return static_cast<int>(values.integer("TETHER_LOCAL_NRANKS"));
  const settings::Variable& v = settings::find("TETHER_LOCAL_NRANKS");
  for (const char* var : {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE"}) {
    auto text = env::get(var);
    if (!text) continue;
    try {
      return static_cast<int>(detail::parseEnvInt(var, text->c_str(), 1, v.hi));
    } catch (const Error&) {
      continue;  // not one number: unknown from this launcher
    }
  }
  return 0;
}

}  // namespace

// ---- construction ----

UniqueId TcpBootstrap::createUniqueId() {
  auto addr = chooseListenAddress(asio::ip::address_v4::any(), "");
  return createUniqueId(toString(tcp::endpoint(addr, 0)));
}

UniqueId TcpBootstrap::createUniqueId(const std::string& rootHostPort) {
  auto hp = parseHostPort(rootHostPort);
  uid::Fields f;
  f.version = wire::kProtocolVersion;
  f.root = toPeerAddress(tcp::endpoint(resolveHost(hp.host), hp.port), 0);
  if (hp.port == 0) f.root = reserved::reserve(f.root);
  crypto::randomBytes(f.secret.data(), f.secret.size());
  return uid::make(f);
}

UniqueId TcpBootstrap::uniqueIdFromRoot(const std::string& rootHostPort) {
  return job::uniqueIdFromRoot(settings::Values::read("uniqueIdFromRoot: "), rootHostPort);
}

UniqueId job::uniqueIdFromRoot(const settings::Values& values, const std::string& rootHostPort) {
  auto hp = parseHostPort(rootHostPort);
  if (hp.port == 0)  // "fd00::2:29618": a bare IPv6 address (its last group is no port)
    throw Error(ErrorCode::InvalidArgument,
                "root address '" + rootHostPort + "' needs a port" +
                    (hp.host.find(':') != std::string::npos ? " (IPv6: write [addr]:port)" : ""));
  uid::Fields f;
  f.version = wire::kProtocolVersion;
  f.root = toPeerAddress(tcp::endpoint(resolveHost(hp.host), hp.port), 0);
  // Without TETHER_SECRET, from the address and every job id the launcher
  // gives: two jobs at one root address then never prove each other's secret.
  std::string derived = "tether-address-only:" + rootHostPort;
  if (auto job = job::identity(values); !job.empty()) derived += "\njob " + job;
  auto secretText = values.text("TETHER_SECRET").value_or(derived);
  auto d = crypto::sha256(secretText.data(), secretText.size());
  std::copy_n(d.begin(), f.secret.size(), f.secret.begin());
  return uid::make(f);
}

void TcpBootstrap::forgetUniqueId(const UniqueId& id) { reserved::release(uid::parse(id).root); }

TcpBootstrap::TcpBootstrap(int rank, int nranks, const UniqueId& id, const TcpOptions& options) {
  const auto began = std::chrono::steady_clock::now();
  if (nranks < 1 || rank < 0 || rank >= nranks)
    throw Error(ErrorCode::InvalidArgument, fmt::format("rank {} of {} ranks is not valid", rank, nranks), rank);
  const settings::Values values = [&] {
    try {
      return settings::Values::read(fmt::format("rank {}: ", rank));  // every TETHER_* variable, before anything starts
    } catch (const Error& e) {
      throw Error(e.code(), e.what(), rank);
    }
  }();
  impl_ = startTcpWorld(rank, nranks, id, options, values, began);
}

std::shared_ptr<Communicator> startTcpWorld(int rank, int nranks, const UniqueId& id, const TcpOptions& options,
                                            const settings::Values& values, std::chrono::steady_clock::time_point began) {
  auto f = uid::parse(id);
  WorldConfig cfg;
  cfg.began = began;
  cfg.rank = rank;
  cfg.nranks = nranks;
  cfg.secret = f.secret;
  cfg.worldId = uid::worldId(f.secret);
  cfg.root = toEndpoint(f.root);
  cfg.timeout = env::resolveTimeout(options.timeout, fmt::format("rank {}: TcpOptions::timeout", rank));
  if (options.handshakeTimeout.count() < 0)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("rank {}: TcpOptions::handshakeTimeout is negative ({} ms; 0: TETHER_HANDSHAKE_TIMEOUT_MS)",
                            rank, options.handshakeTimeout.count()),
                rank);
  cfg.handshakeTimeout = options.handshakeTimeout.count() > 0
                             ? options.handshakeTimeout
                             : values.milliseconds("TETHER_HANDSHAKE_TIMEOUT_MS", std::chrono::milliseconds(10000));
  // An unsigned value past INT64_MAX is out of every range.
  const auto payload = static_cast<std::int64_t>(std::min<std::uint64_t>(options.maxPayloadBytes, INT64_MAX));
  cfg.maxPayload =
      static_cast<std::uint64_t>(limit(values, rank, "maxPayloadBytes", payload, "TETHER_MAX_PAYLOAD_BYTES"));
  cfg.listenHost = options.listenHost;
  cfg.advertise = options.advertise;
  cfg.advertiseFor = options.advertiseFor;
  // One bound, TETHER_LIVENESS_S, gives the three keepalive settings.
  const auto keepalive = settings::keepaliveFor(values.integer("TETHER_LIVENESS_S"));
  const std::string derived = "from TETHER_LIVENESS_S";
  cfg.keepaliveIdleS =
      static_cast<int>(option(rank, "keepaliveIdleS", options.keepaliveIdleS, 1, 32767, keepalive.idleS, derived));
  cfg.keepaliveIntervalS = static_cast<int>(
      option(rank, "keepaliveIntervalS", options.keepaliveIntervalS, 1, 32767, keepalive.intervalS, derived));
  cfg.keepaliveCount =
      static_cast<int>(option(rank, "keepaliveCount", options.keepaliveCount, 1, 127, keepalive.count, derived));
  cfg.maxLinks = static_cast<int>(limit(values, rank, "maxLinks", options.maxLinks, "TETHER_MAX_LINKS"));
  cfg.maxDials = static_cast<int>(option(rank, "maxDials", options.maxDials, 1, 1 << 20, cfg.maxDials, "32"));
  if (options.eagerBytes > 0) cfg.eagerBytes = options.eagerBytes;
  cfg.rendezvous = values.text("TETHER_RENDEZVOUS").value_or("auto");
  cfg.rendezvousTreeRadix = static_cast<int>(
      option(rank, "rendezvousTreeRadix", options.rendezvousTreeRadix, 2, 1 << 20, cfg.rendezvousTreeRadix, "8"));
  cfg.hostLocal = values.integer("TETHER_HOST_LOCAL") == 1;
  cfg.localRanks = localRanks(values);
  cfg.hostGroupMax =
      static_cast<int>(option(rank, "hostGroupMax", options.hostGroupMax, 2, 1024, cfg.hostGroupMax, "64"));
  if (options.pollUs < -1 || options.pollUs > 1000000)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("rank {}: TcpOptions::pollUs={} is out of range [-1, 1000000] (-1: 50; 0: off)", rank,
                            options.pollUs),
                rank);
  if (options.pollUs >= 0) cfg.pollUs = options.pollUs;
  cfg.hostId = values.text("TETHER_HOST_ID").value_or("");
  cfg.p2pWindow = static_cast<std::uint64_t>(values.integer("TETHER_P2P_WINDOW_BYTES"));
  cfg.interfaces = interfaceFilter(values);
  // A bad TETHER_ALGO now, not mid-collective.
  coll::checkSettings(values.text("TETHER_ALGO"), fmt::format("rank {}: ", rank));
  return std::make_shared<Communicator>(World::create(std::move(cfg)));
}

TcpBootstrap::TcpBootstrap(std::shared_ptr<Communicator> impl) : impl_(std::move(impl)) {}

TcpBootstrap::~TcpBootstrap() = default;

bool TcpBootstrap::close(std::chrono::milliseconds timeout) noexcept {
  try {
    World& w = impl_->world();
    const auto cap = std::min(w.config().timeout, std::chrono::milliseconds(5000));
    if (timeout > std::chrono::milliseconds(0)) return w.close(timeout, timeout);
    return w.close(cap, w.config().timeout);
  } catch (const std::exception& e) {
    log::warn(impl_->world().rank(), "close: {}", e.what());
    return false;
  }
}

int TcpBootstrap::rank() const { return impl_->rank(); }
int TcpBootstrap::size() const { return impl_->size(); }
int TcpBootstrap::nranksPerNode() const { return impl_->nranksPerNode(); }
int TcpBootstrap::worldRank() const { return impl_->world().rank(); }
int TcpBootstrap::localRank() const { return impl_->localRank(); }
int TcpBootstrap::nodeId() const { return impl_->nodeId(); }
int TcpBootstrap::nnodes() const { return impl_->nnodes(); }

std::string TcpBootstrap::peerHost(int peer) const {
  args::peer(rank(), size(), "peerHost", peer);
  return toEndpoint(impl_->address(peer)).address().to_string();
}

std::string TcpBootstrap::peerAddress(int peer) const {
  args::peer(rank(), size(), "peerAddress", peer);
  return toString(toEndpoint(impl_->address(peer)));
}

void TcpBootstrap::setTimeout(std::chrono::milliseconds timeout) { impl_->setTimeout(timeout); }
std::chrono::milliseconds TcpBootstrap::timeout() const { return impl_->timeout(); }

InitTimings TcpBootstrap::initTimings() const { return impl_->world().initTimings(); }
Counters TcpBootstrap::counters() const { return impl_->counters(); }

void TcpBootstrap::abort(const std::string& reason) { impl_->world().abort(impl_->world().rank(), reason); }

// ---- point-to-point ----

void TcpBootstrap::send(const void* data, std::size_t bytes, int peer, int tag) {
  args::message(rank(), size(), "send", data, bytes, peer, tag);
  args::payload(rank(), "send", bytes, impl_->world().config().maxPayload);
  impl_->send(data, bytes, peer, tag);
}

void TcpBootstrap::recv(void* data, std::size_t bytes, int peer, int tag) {
  args::message(rank(), size(), "recv", data, bytes, peer, tag);
  args::payload(rank(), "recv", bytes, impl_->world().config().maxPayload);
  impl_->recv(data, bytes, peer, tag);
}

// ---- collectives (built in tether/detail/coll/front.hpp) ----

void TcpBootstrap::allgather(void* allData, std::size_t bytesPerRank) {
  impl_->collective(dc::allgatherCall(rank(), size(), "allgather", allData, bytesPerRank));
}

void TcpBootstrap::alltoall(const void* sendData, void* recvData, std::size_t bytesPerRank) {
  impl_->collective(dc::alltoallCall(rank(), size(), "alltoall", sendData, recvData, bytesPerRank));
}

void TcpBootstrap::alltoallv(const void* sendData, const std::size_t* sendCounts, const std::size_t* sendDispls,
                             void* recvData, const std::size_t* recvCounts, const std::size_t* recvDispls) {
  impl_->collective(
      dc::alltoallvCall(rank(), size(), sendData, sendCounts, sendDispls, recvData, recvCounts, recvDispls));
}

void TcpBootstrap::broadcast(void* data, std::size_t bytes, int root) {
  impl_->collective(dc::broadcastCall(rank(), size(), data, bytes, root));
}

void TcpBootstrap::barrier() { impl_->collective(dc::barrierCall()); }

void TcpBootstrap::barrier(const std::vector<int>& ranks) { impl_->subsetBarrier(args::subset(rank(), size(), ranks)); }

std::shared_ptr<Bootstrap> TcpBootstrap::split(int color, int key) {
  auto child = impl_->split(color, key);
  if (!child) return nullptr;
  return std::shared_ptr<Bootstrap>(new TcpBootstrap(std::move(child)));
}

// ---- nonblocking (tether/request.hpp) ----

Request TcpBootstrap::isend(const void* data, std::size_t bytes, int peer, int tag) {
  args::message(rank(), size(), "isend", data, bytes, peer, tag);
  args::payload(rank(), "isend", bytes, impl_->world().config().maxPayload);
  return Request(impl_->startSend(data, bytes, peer, tag));
}

Request TcpBootstrap::irecv(void* data, std::size_t bytes, int peer, int tag) {
  args::message(rank(), size(), "irecv", data, bytes, peer, tag);
  args::payload(rank(), "irecv", bytes, impl_->world().config().maxPayload);
  return Request(impl_->startRecv(data, bytes, peer, tag));
}

Request TcpBootstrap::iallgather(void* allData, std::size_t bytesPerRank) {
  return Request(impl_->startCollective(dc::allgatherCall(rank(), size(), "iallgather", allData, bytesPerRank)));
}

Request TcpBootstrap::ialltoall(const void* sendData, void* recvData, std::size_t bytesPerRank) {
  return Request(
      impl_->startCollective(dc::alltoallCall(rank(), size(), "ialltoall", sendData, recvData, bytesPerRank)));
}

Request TcpBootstrap::ibarrier() { return Request(impl_->startCollective(dc::barrierCall())); }

}  // namespace tether
