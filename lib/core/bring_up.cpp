#include "core/bring_up.hpp"

#include <fmt/format.h>

#include <boost/asio/post.hpp>
#include <algorithm>
#include <thread>
#include <unordered_map>

#include "base/crypto.hpp"
#include "base/endpoint.hpp"
#include "base/log.hpp"
#include "coll/select.hpp"
#include "core/world.hpp"
#include "rendezvous/reserved_listener.hpp"

namespace tether {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

PeerAddress openListener(asio::io_context& io, const link::TcpOptions& options, const WorldConfig& cfg,
                         std::shared_ptr<link::Listener>& out) {
  boost::system::error_code ec;
  tcp::endpoint at = cfg.root;
  std::shared_ptr<link::TcpListener> listener;
  if (cfg.rank == 0) {
    // An adopted socket was bound by createUniqueId() (not listening yet).
    auto fd = reserved::take(toPeerAddress(cfg.root, 0));
    listener = link::TcpListener::open(io, options, cfg.root, /*reuseAddress=*/true, fd, ec);
  } else {
    reserved::release(toPeerAddress(cfg.root, 0));  // an inherited reservation is rank 0's, not ours
    at = tcp::endpoint(chooseListenAddress(cfg.root.address(), cfg.listenHost, cfg.interfaces, cfg.rank), 0);
    listener = link::TcpListener::open(io, options, at, /*reuseAddress=*/false, std::nullopt, ec);
    if (!ec && listener->localEndpoint() == cfg.root) {
      // The kernel's free port is the root's, on the root's own address: the
      // root is not listening yet (a port of the ephemeral range, this rank
      // started first). Kept, the root could not listen there. Take another
      // while holding this one, which closes when it is replaced.
      log::info(cfg.rank, "the port given to this rank's listener is the root's ({}): taking another",
                toString(cfg.root));
      listener = link::TcpListener::open(io, options, at, /*reuseAddress=*/false, std::nullopt, ec);
    }
  }
  if (ec) {
    // Another process listens on the root's port: another job given the same
    // root address, or an earlier run still closing. Never share it.
    std::string hint = cfg.rank == 0 && ec == asio::error::address_in_use
                           ? " (another process listens there: another job with the same TETHER_ROOT or "
                             "MASTER_ADDR/MASTER_PORT, or an earlier run still closing; give each job its own port)"
                           : "";
    throw Error(ErrorCode::System,
                fmt::format("rank {}: cannot listen on {}{}: {}{}", cfg.rank, cfg.rank == 0 ? "the root address " : "",
                            toString(at), ec.message(), hint),
                cfg.rank);
  }
  auto local = listener->localEndpoint();
  out = listener;
  tcp::endpoint advertised = local;
  std::string override = cfg.advertiseFor ? cfg.advertiseFor(toString(local)) : cfg.advertise;
  if (!override.empty()) {
    auto hp = parseHostPort(override);
    advertised = tcp::endpoint(resolveHost(hp.host), hp.port);
  }
  PeerAddress self = toPeerAddress(advertised, thisHostId(cfg.hostId));
  self.cores = static_cast<std::uint16_t>(std::clamp(std::thread::hardware_concurrency(), 1u, 65535u));
  self.plans = planFingerprint(cfg.maxPayload);
  log::info(cfg.rank, "listening on {} (advertised as {})", toString(local), toString(advertised));
  return self;
}

void RendezvousHost::connect(int peer, const PeerAddress& at) {
  table_.open(peer);
  events_.dialing(peer);
  connector_.dial(peer, table_.epoch(peer), link::tcpEndpoint(at),
                  {link::Clock::now() + timeout_, /*retryRefused=*/true});
}

void RendezvousHost::send(int peer, wire::Kind kind, wire::SharedBytes payload) {
  if (const auto& l = table_.current(peer)) l->enqueue(link::controlFrame(kind, std::move(payload)));
}

bool RendezvousHost::release(int peer) {
  const auto l = table_.current(peer);
  if (!l || l->state() != link::Link::State::Up || !l->idle() || l->midFrame()) return false;
  log::trace(rank_, "rendezvous: releasing the link to rank {}", peer);
  l->sendGoodbye(wire::GoodbyeMode::Idle);
  table_.setAside(*l);
  return true;
}

void RendezvousHost::post(std::function<void()> fn) { asio::post(io_, std::move(fn)); }

Topology learnTopology(int nranks, const std::function<PeerAddress(int)>& address) {
  Topology t;
  std::unordered_map<std::uint64_t, int> nodes;
  std::vector<int> cores;
  t.nodeOf.resize(nranks);
  std::uint64_t firstPlans = 0;
  for (int r = 0; r < nranks; ++r) {
    const PeerAddress a = address(r);
    if (r == 0) firstPlans = a.plans;
    if (t.plansDiffer < 0 && a.plans != firstPlans) t.plansDiffer = r;
    auto [it, added] = nodes.emplace(a.hostId, static_cast<int>(nodes.size()));
    if (added) {
      t.ranksOn.push_back(0);
      cores.push_back(a.cores);
    }
    t.nodeOf[r] = it->second;
    ++t.ranksOn[it->second];
  }
  for (std::size_t n = 0; n < cores.size(); ++n)
    if (cores[n] > 0 && t.ranksOn[n] > cores[n]) t.cpuBound = true;
  return t;
}

std::uint64_t planFingerprint(std::uint64_t maxPayload) {
  return crypto::hash64("tether-plans", coll::planSettings() + ",max_payload=" + std::to_string(maxPayload));
}

void checkSamePlans(const Topology& t, int rank, std::uint64_t maxPayload, const char* call) {
  if (t.plansDiffer < 0) return;
  throw Error(ErrorCode::InvalidArgument,
              fmt::format("rank {}: {}: rank {}'s collective settings differ from rank 0's: every rank must set the "
                          "same TETHER_ALGO and TETHER_MAX_PAYLOAD_BYTES, else their plans do not meet (this rank: "
                          "{}, TETHER_MAX_PAYLOAD_BYTES={})",
                          rank, call, t.plansDiffer, coll::planSettings(), maxPayload),
              rank);
}

}  // namespace tether
