// The public TcpBootstrap: argument checks, then each call becomes one Op run
// on the world's progress thread.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <set>
#include <thread>

#include "collectives/select.hpp"
#include "core/communicator.hpp"
#include "base/crypto.hpp"
#include "base/endpoint.hpp"
#include "base/env.hpp"
#include "base/join.hpp"
#include "core/unique_id_layout.hpp"
#include "rendezvous/reserved_listener.hpp"

namespace tether {

namespace asio = boost::asio;

namespace {

asio::awaitable<void> collectiveBody(World* w, coll::Group g, Op* opp,
                                     std::function<asio::awaitable<void>(coll::Context&)> algo) {
  Op& op = *opp;
  op.members = g.worldRanks;
  w->setCurrentCollective(g.comm, op.coll, &op);
  coll::Context ctx(*w, op, g);
  co_await algo(ctx);
}

asio::awaitable<void> sendBody(World* w, Op* op, int dst, wire::FrameHeader h, const void* data) {
  w->sendFrame(*op, dst, h, data, /*reference=*/true);
  co_await w->settle(*op);
}

asio::awaitable<void> recvBody(World* w, Op* op, match::Key key, void* data, std::size_t bytes) {
  w->postRecv(*op, key, data, bytes);
  co_await w->settle(*op);
}

void requireBuffer(const void* p, std::size_t bytes, const char* op, int rank) {
  if (!p && bytes)
    throw Error(ErrorCode::InvalidArgument, fmt::format("rank {}: {}: null buffer for {} bytes", rank, op, bytes),
                rank);
}

}  // namespace

void TcpBootstrap::Impl::collective(wire::OpCode code, const coll::Group& g, std::uint64_t coll,
                                    std::function<asio::awaitable<void>(coll::Context&)> algo) {
  auto op = std::make_shared<Op>(g.comm, coll, static_cast<std::uint32_t>(code));
  if (!brokenBy.empty())
    throw Error(ErrorCode::Protocol,
                fmt::format("rank {}: {}: communicator unusable after an earlier collective failed: {}", group.rank,
                            op->name(), brokenBy),
                group.rank);
  World* w = world.get();
  try {
    world->run(op, [w, g, algo](Op& o) { return collectiveBody(w, g, &o, algo); }, deadline());
  } catch (const Error& e) {
    brokenBy = e.what();
    throw;
  }
}

void TcpBootstrap::Impl::collective(wire::OpCode code,
                                    std::function<asio::awaitable<void>(coll::Context&)> algo) {
  collective(code, group, nextColl++, std::move(algo));
}

void TcpBootstrap::Impl::checkPeer(int peer, const char* what) const {
  if (peer < 0 || peer >= group.size)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("rank {}: {}: peer {} is out of range [0, {})", group.rank, what, peer, group.size),
                group.rank, peer);
}

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
  auto hp = parseHostPort(rootHostPort);
  if (hp.port == 0)
    throw Error(ErrorCode::InvalidArgument, "root address '" + rootHostPort + "' needs a port");
  uid::Fields f;
  f.version = wire::kProtocolVersion;
  f.root = toPeerAddress(tcp::endpoint(resolveHost(hp.host), hp.port), 0);
  auto secretText = env::get("TETHER_SECRET").value_or("tether-address-only:" + rootHostPort);
  auto d = crypto::sha256(secretText.data(), secretText.size());
  std::copy_n(d.begin(), f.secret.size(), f.secret.begin());
  return uid::make(f);
}

void TcpBootstrap::forgetUniqueId(const UniqueId& id) { reserved::release(uid::parse(id).root); }

TcpBootstrap::TcpBootstrap(int rank, int nranks, const UniqueId& id, const TcpOptions& options) {
  if (nranks < 1 || rank < 0 || rank >= nranks)
    throw Error(ErrorCode::InvalidArgument, fmt::format("rank {} of {} ranks is not valid", rank, nranks), rank);
  auto f = uid::parse(id);
  WorldConfig cfg;
  cfg.rank = rank;
  cfg.nranks = nranks;
  cfg.secret = f.secret;
  cfg.worldId = crypto::hash64("tether-world",
                               std::string_view(reinterpret_cast<const char*>(f.secret.data()), f.secret.size()));
  cfg.root = toEndpoint(f.root);
  cfg.timeout = env::resolveTimeout(options.timeout, fmt::format("rank {}: TcpOptions::timeout", rank));
  cfg.handshakeTimeout = env::getMs("TETHER_HANDSHAKE_TIMEOUT_MS", std::chrono::milliseconds(10000));
  cfg.maxPayload = static_cast<std::uint64_t>(env::getInt("TETHER_MAX_PAYLOAD_BYTES", 1LL << 30));
  cfg.listenHost = options.listenHost;
  cfg.advertise = options.advertise;
  cfg.advertiseFor = options.advertiseFor;
  cfg.keepaliveIdleS = static_cast<int>(env::getInt("TETHER_KEEPALIVE_IDLE_S", 10));
  cfg.keepaliveIntervalS = static_cast<int>(env::getInt("TETHER_KEEPALIVE_INTERVAL_S", 2));
  cfg.keepaliveCount = static_cast<int>(env::getInt("TETHER_KEEPALIVE_COUNT", 3));
  coll::selection();  // reject bad algorithm variables now, not mid-collective

  auto impl = std::make_shared<Impl>();
  impl->timeoutMs = cfg.timeout.count();
  impl->world = World::create(std::move(cfg));
  impl->group.comm = impl->world->config().worldId;
  impl->group.rank = rank;
  impl->group.size = nranks;
  impl->group.worldRanks.resize(nranks);
  std::iota(impl->group.worldRanks.begin(), impl->group.worldRanks.end(), 0);
  const auto& table = impl->world->table();
  impl->nranksPerNode = static_cast<int>(std::count_if(
      table.begin(), table.end(), [&](const PeerAddress& a) { return a.hostId == table[rank].hostId; }));
  impl->cpuBound = impl->nranksPerNode > static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  impl_ = std::move(impl);
}

TcpBootstrap::TcpBootstrap(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

TcpBootstrap::~TcpBootstrap() = default;

int TcpBootstrap::rank() const { return impl_->group.rank; }
int TcpBootstrap::size() const { return impl_->group.size; }
int TcpBootstrap::nranksPerNode() const { return impl_->nranksPerNode; }
int TcpBootstrap::worldRank() const { return impl_->world->rank(); }

void TcpBootstrap::setTimeout(std::chrono::milliseconds timeout) {
  impl_->timeoutMs = env::resolveTimeout(timeout, fmt::format("rank {}: setTimeout", rank())).count();
}
std::chrono::milliseconds TcpBootstrap::timeout() const { return std::chrono::milliseconds(impl_->timeoutMs.load()); }

void TcpBootstrap::abort(const std::string& reason) { impl_->world->abort(impl_->world->rank(), reason); }

// ---- point-to-point ----

void TcpBootstrap::send(const void* data, std::size_t bytes, int peer, int tag) {
  auto& m = *impl_;
  m.checkPeer(peer, "send");
  if (tag < 0) throw Error(ErrorCode::InvalidArgument, fmt::format("rank {}: send: negative tag {}", rank(), tag), rank());
  requireBuffer(data, bytes, "send", rank());
  wire::FrameHeader h;
  h.kind = wire::Kind::P2P;
  h.comm = m.group.comm;
  h.tag = static_cast<std::uint32_t>(tag);
  h.length = bytes;
  auto op = std::make_shared<Op>(Op::Kind::Send, m.group.comm, peer, tag);
  World* w = m.world.get();
  int dst = m.group.worldRanks[peer];
  w->run(op, [w, dst, h, data](Op& o) { return sendBody(w, &o, dst, h, data); }, m.deadline());
}

void TcpBootstrap::recv(void* data, std::size_t bytes, int peer, int tag) {
  auto& m = *impl_;
  m.checkPeer(peer, "recv");
  if (tag < 0) throw Error(ErrorCode::InvalidArgument, fmt::format("rank {}: recv: negative tag {}", rank(), tag), rank());
  requireBuffer(data, bytes, "recv", rank());
  match::Key key{static_cast<std::uint32_t>(m.group.worldRanks[peer]), m.group.comm, wire::Kind::P2P, 0, 0,
                 static_cast<std::uint32_t>(tag)};
  auto op = std::make_shared<Op>(Op::Kind::Recv, m.group.comm, peer, tag);
  World* w = m.world.get();
  w->run(op, [w, key, data, bytes](Op& o) { return recvBody(w, &o, key, data, bytes); }, m.deadline());
}

// ---- collectives ----

void TcpBootstrap::allgather(void* allData, std::size_t bytesPerRank) {
  requireBuffer(allData, bytesPerRank, "allgather", rank());
  std::lock_guard lock(impl_->collMutex);
  auto* data = static_cast<unsigned char*>(allData);
  const auto& sel = coll::selection();
  auto algo = sel.allgather(bytesPerRank, size(), impl_->cpuBound);
  int radix = sel.treeRadix;
  impl_->collective(wire::OpCode::Allgather, [data, bytesPerRank, algo, radix](coll::Context& c) {
    switch (algo) {
      case coll::AllgatherAlgo::Ring: return coll::allgatherRing(c, data, bytesPerRank);
      case coll::AllgatherAlgo::Linear: return coll::allgatherLinear(c, data, bytesPerRank);
      case coll::AllgatherAlgo::Tree: return coll::allgatherTree(c, data, bytesPerRank, radix);
      default: return coll::allgatherBruck(c, data, bytesPerRank);
    }
  });
}

void TcpBootstrap::alltoall(const void* sendData, void* recvData, std::size_t bytesPerRank) {
  std::vector<std::size_t> counts(size(), bytesPerRank), displs(size());
  for (int i = 0; i < size(); ++i) displs[i] = static_cast<std::size_t>(i) * bytesPerRank;
  requireBuffer(sendData, bytesPerRank, "alltoall", rank());
  requireBuffer(recvData, bytesPerRank, "alltoall", rank());
  std::lock_guard lock(impl_->collMutex);
  auto* s = static_cast<const unsigned char*>(sendData);
  auto* r = static_cast<unsigned char*>(recvData);
  int window = coll::selection().alltoallWindow(bytesPerRank, size());
  impl_->collective(wire::OpCode::Alltoall, [=](coll::Context& c) {
    return coll::alltoallv(c, s, counts.data(), displs.data(), r, counts.data(), displs.data(), window);
  });
}

void TcpBootstrap::alltoallv(const void* sendData, const std::size_t* sendCounts, const std::size_t* sendDispls,
                             void* recvData, const std::size_t* recvCounts, const std::size_t* recvDispls) {
  if (!sendCounts || !sendDispls || !recvCounts || !recvDispls)
    throw Error(ErrorCode::InvalidArgument, fmt::format("rank {}: alltoallv: null count or displacement array", rank()),
                rank());
  std::size_t maxPair = 0, sendTotal = 0, recvTotal = 0;
  for (int i = 0; i < size(); ++i) {
    maxPair = std::max({maxPair, sendCounts[i], recvCounts[i]});
    sendTotal += sendCounts[i];
    recvTotal += recvCounts[i];
  }
  requireBuffer(sendData, sendTotal, "alltoallv", rank());
  requireBuffer(recvData, recvTotal, "alltoallv", rank());
  std::vector<std::size_t> sc(sendCounts, sendCounts + size()), sd(sendDispls, sendDispls + size()),
      rc(recvCounts, recvCounts + size()), rd(recvDispls, recvDispls + size());
  std::lock_guard lock(impl_->collMutex);
  auto* s = static_cast<const unsigned char*>(sendData);
  auto* r = static_cast<unsigned char*>(recvData);
  int window = coll::selection().alltoallWindow(maxPair, size());
  impl_->collective(wire::OpCode::Alltoallv, [=](coll::Context& c) {
    return coll::alltoallv(c, s, sc.data(), sd.data(), r, rc.data(), rd.data(), window);
  });
}

void TcpBootstrap::broadcast(void* data, std::size_t bytes, int root) {
  impl_->checkPeer(root, "broadcast root");
  requireBuffer(data, bytes, "broadcast", rank());
  std::lock_guard lock(impl_->collMutex);
  auto* d = static_cast<unsigned char*>(data);
  const auto& sel = coll::selection();
  auto algo = sel.broadcast(bytes, size());
  std::size_t chunk = sel.pipelineChunk();
  impl_->collective(wire::OpCode::Broadcast, [=](coll::Context& c) {
    return algo == coll::BroadcastAlgo::Pipeline ? coll::broadcastPipeline(c, d, bytes, root, chunk)
                                                 : coll::broadcastBinomial(c, d, bytes, root);
  });
}

void TcpBootstrap::barrier() {
  std::lock_guard lock(impl_->collMutex);
  const auto& sel = coll::selection();
  auto algo = sel.barrier(impl_->cpuBound);
  int radix = sel.treeRadix;
  impl_->collective(wire::OpCode::Barrier, [algo, radix](coll::Context& c) {
    return algo == coll::BarrierAlgo::Tree ? coll::barrierTree(c, radix) : coll::barrierDissemination(c);
  });
}

void TcpBootstrap::barrier(const std::vector<int>& ranks) {
  auto& m = *impl_;
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    throw Error(ErrorCode::InvalidArgument, fmt::format("rank {}: subset barrier: duplicate rank in the list", rank()),
                rank());
  for (int r : sorted) m.checkPeer(r, "subset barrier");
  auto me = std::find(sorted.begin(), sorted.end(), rank());
  if (me == sorted.end())
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("rank {}: subset barrier: the list does not contain this rank", rank()), rank());
  std::lock_guard lock(m.collMutex);
  coll::Group g;
  g.comm = crypto::hash64(fmt::format("subset:{}", m.group.comm), joined(sorted, ","));
  g.rank = static_cast<int>(me - sorted.begin());
  g.size = static_cast<int>(sorted.size());
  for (int r : sorted) g.worldRanks.push_back(m.group.worldRanks[r]);
  std::uint64_t call = ++m.subsetCalls[sorted];
  m.collective(wire::OpCode::SubsetBarrier, g, call, [](coll::Context& c) { return coll::barrierDissemination(c); });
}

std::shared_ptr<Bootstrap> TcpBootstrap::split(int color, int key) {
  if (color < 0 && color != kNoColor)
    throw Error(ErrorCode::InvalidArgument, fmt::format("rank {}: split: negative color {}", rank(), color), rank());
  auto& m = *impl_;
  std::vector<std::int32_t> pairs(2 * static_cast<std::size_t>(size()));
  pairs[2 * rank()] = color;
  pairs[2 * rank() + 1] = key;
  std::uint64_t splitNo;
  {
    std::lock_guard lock(m.collMutex);
    splitNo = ++m.splits;
    auto* data = reinterpret_cast<unsigned char*>(pairs.data());
    m.collective(wire::OpCode::Split, [data](coll::Context& c) { return coll::allgatherBruck(c, data, 8); });
  }
  if (color == kNoColor) return nullptr;
  std::vector<int> members;  // parent ranks, ordered by (key, parent rank)
  for (int r = 0; r < size(); ++r)
    if (pairs[2 * r] == color) members.push_back(r);
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return pairs[2 * a + 1] < pairs[2 * b + 1]; });
  auto child = std::make_shared<Impl>();
  child->world = m.world;
  child->timeoutMs = m.timeoutMs.load();
  child->cpuBound = m.cpuBound;
  child->group.comm = crypto::hash64(fmt::format("split:{}:{}", m.group.comm, splitNo), std::to_string(color));
  child->group.size = static_cast<int>(members.size());
  const auto& table = m.world->table();
  auto myHost = table[m.world->rank()].hostId;
  child->nranksPerNode = 0;
  for (std::size_t i = 0; i < members.size(); ++i) {
    int wr = m.group.worldRanks[members[i]];
    child->group.worldRanks.push_back(wr);
    if (members[i] == rank()) child->group.rank = static_cast<int>(i);
    if (table[wr].hostId == myHost) ++child->nranksPerNode;
  }
  return std::shared_ptr<Bootstrap>(new TcpBootstrap(std::move(child)));
}

}  // namespace tether
