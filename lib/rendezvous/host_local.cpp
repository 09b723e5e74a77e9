// Host-local rendezvous (TETHER_HOST_LOCAL=1): the ranks of each host meet
// over the host's abstract Unix sockets first, in groups of at most
// TcpOptions::hostGroupMax, 64 (host_group.hpp); each group's leader registers the
// whole group with the root in one Register frame (the group's Register
// records back to back) and fans the table out over the same sockets. The
// root handles one registration per group (one per host up to that size).
// When the root's group has a leader other than rank 0, that leader registers
// it like any other; when rank 0 leads its group, its members register with
// it directly. docs/scale.md, "Host-local aggregation".
//
// The table goes down a k-nomial tree of the leaders (leader_tree.hpp; radix
// TcpOptions::rendezvousTreeRadix): the root sends it to its children only, in
// the leaders' form (wire/host_table.hpp: the tree and the table), and each
// leader, once its parent's arrives, dials its own children and forwards the
// same bytes, writes the plain table to its group, and answers its parent
// TableAck once each of its children has (a leaf at once), and is then done.
// The root is done when its children have acknowledged, so it still hears a
// leader lost (or closed without an acknowledgement) before its part of the
// tree holds the table: each leader keeps its registration link to the root
// until then, and the root's failure reaches every leader on it as an abort
// naming the lost one (the leaders below it never had a link to it). A
// leader fails, and tells the root, when it cannot dial a child or loses one
// before its acknowledgement. A leader lost before the table is sent fails
// the rendezvous at the root as before.

#include <fmt/format.h>

#include <atomic>

#include "base/endpoint.hpp"
#include "base/join.hpp"
#include "base/log.hpp"
#include "rendezvous/host_local.hpp"
#include "wire/host_table.hpp"

namespace tether::rdv {

namespace {

std::atomic<int> hostRegistrations{0};

}  // namespace

HostLocal::~HostLocal() {
  if (group_) group_->close();
}

void HostLocal::start(const PeerAddress& self) {
  if (cfg_.rank == 0) {
    registerSelf(self);
    if (cfg_.nranks == 1) {
      table_ = table();
      return complete("");
    }
  }
  HostGroupOptions o;
  o.rank = cfg_.rank;
  o.nranks = cfg_.nranks;
  o.secret = cfg_.secret;
  o.worldId = cfg_.worldId;
  o.socket = hostSocketName(cfg_.secret, cfg_.worldId, cfg_.nranks, self.hostId);
  o.localRanks = local_;
  o.groupMax = cfg_.hostGroupMax;
  HostGroupEvents e;
  e.leading = [this] { onLeading(); };
  e.batch = [this](std::vector<wire::Register> b) { onBatch(std::move(b)); };
  e.table = [this](wire::SharedBytes t) { onTable(-1, std::move(t)); };
  e.joined = [this] { host_.phase(Phase::HostLocal); };
  e.failed = [this](ErrorCode code, std::string what, int peer) { stop(code, what, peer); };
  e.left = [this](int member, ErrorCode code, std::string why, int peer) { onMemberLeft(member, code, why, peer); };
  group_ = HostGroup::start(*cfg_.io, std::move(o), std::move(e), self);
}

bool HostLocal::onFrame(int peer, wire::Kind kind, wire::SharedBytes payload) {
  if (kind == wire::Kind::Register) {
    onHostRegister(peer, *payload);
    return true;
  }
  if (kind == wire::Kind::Table) {
    onLeaderTable(peer, std::move(payload));
    return true;
  }
  if (kind == wire::Kind::TableAck) {
    onTableAck(peer);
    return true;
  }
  return false;
}

void HostLocal::onLinkUp(int peer) {
  if (peer == 0) connectedToRoot_ = true;
  if (peer == 0 && sentToRoot_ && cfg_.rank != 0) host_.phase(Phase::Registered);  // with the batch queued
}

void HostLocal::onLinkDown(int peer, const std::string& reason, bool graceful) {
  if (done_) return;
  if (tree_ && (cfg_.rank == 0 || peer != 0)) return onTreeLinkDown(peer, reason, graceful);
  if (cfg_.rank != 0) {
    if (peer == 0) stop(ErrorCode::PeerLost, fmt::format("rendezvous: lost the root (rank 0): {}", reason), 0);
    return;
  }
  std::string host = hostOf(peer);
  if (graceful)
    return stop(
        ErrorCode::PeerLost,
        fmt::format("rendezvous failed: rank {}{} left before the table was sent; {}", peer, host, missingText()),
        peer);
  stop(ErrorCode::PeerLost, fmt::format("rendezvous failed: lost rank {}{}: {}", peer, host, reason), peer);
}

void HostLocal::onConnectFailed(int peer, const link::ConnectFailure& f) {
  if (!done_ && tree_ && tree_->isChild(peer)) return cannotForward(peer, f);
  if (done_ || peer != 0 || cfg_.rank == 0) return;
  if (f.retriesExhausted)
    stop(ErrorCode::Timeout,
         fmt::format("rendezvous timed out after {} ms: could not reach the root at {} ({} attempts; last: {})",
                     cfg_.timeout.count(), toString(toEndpoint(cfg_.root)), f.attempts, f.reason),
         0);
  else if (f.refused && !f.peerClosing)
    stop(ErrorCode::InvalidArgument, fmt::format("rendezvous: refused by the root: {}", f.reason), 0);
  else
    stop(ErrorCode::PeerLost, fmt::format("rendezvous: cannot reach the root: {}", f.reason), 0);
}

void HostLocal::onTimeout() {
  if (done_) return;
  const auto [state, peer] = waitingFor();
  stop(ErrorCode::Timeout, fmt::format("rendezvous timed out after {} ms: {}", cfg_.timeout.count(), state), peer);
}

// A leader's members hear of the job's abort from it alone.
void HostLocal::onAborted(const std::string& why) {
  if (!done_ && group_) group_->abandon(ErrorCode::Aborted, why, cfg_.rank);
}

// " (the host leader of ranks 3, 4, 5)", for the root's messages.
std::string HostLocal::hostOf(int peer) const {
  auto it = hosts_.find(peer);
  if (it == hosts_.end()) return "";
  return fmt::format(" (the host leader of ranks {})", joined(it->second, ", "));
}

// Two groups of one host (or two hosts) registered one rank: each leader
// checked its own group, only the root sees both. Fails the job at once.
bool HostLocal::duplicate(int leader, const wire::Register& r) {
  const int who = static_cast<int>(r.rank);
  if (!registered(who)) return false;
  stop(ErrorCode::InvalidArgument,
       fmt::format("rendezvous failed: two processes claim rank {} (the second via the host leader rank {})", who,
                   leader),
       who);
  return true;
}

// A leader dials the root at once, before its host is complete: if the
// rendezvous fails meanwhile, the root's abort reaches it and its host.
void HostLocal::onLeading() {
  if (cfg_.rank == 0 || dialed_) return;
  dialed_ = true;
  host_.connect(0, cfg_.root);
}

// The leader's batch: the root adds it; another leader sends it to the root.
void HostLocal::onBatch(std::vector<wire::Register> batch) {
  if (done_) return;
  host_.phase(Phase::HostLocal);  // the leader has its whole group
  if (cfg_.rank == 0) {
    ++received_;
    ++hostRegistrations;
    for (const auto& r : batch) {
      if (duplicate(0, r)) return;
      add(0, r, /*viaLeader=*/true);
    }
    return maybeFinish();
  }
  wire::Bytes bytes;
  for (const auto& r : batch) {
    auto one = wire::encode(r);
    bytes.insert(bytes.end(), one.begin(), one.end());
  }
  onLeading();
  sentToRoot_ = true;
  if (connectedToRoot_) host_.phase(Phase::Registered);
  host_.send(0, wire::Kind::Register, std::make_shared<const wire::Bytes>(std::move(bytes)));  // sent once up
}

// The root: a host's Register records, back to back, from its leader.
void HostLocal::onHostRegister(int peer, const wire::Bytes& payload) {
  if (done_) return;
  const std::size_t one = wire::encode(wire::Register{}).size();
  if (cfg_.rank != 0 || payload.empty() || payload.size() % one != 0) {
    log::warn(cfg_.rank, "ignored a malformed host registration from rank {} ({} bytes)", peer, payload.size());
    return;
  }
  ++received_;
  ++hostRegistrations;
  leaders_.insert(peer);
  auto& ranks = hosts_[peer];
  for (std::size_t at = 0; at < payload.size(); at += one) {
    auto r = wire::decodeRegister(wire::Bytes(payload.begin() + static_cast<std::ptrdiff_t>(at),
                                              payload.begin() + static_cast<std::ptrdiff_t>(at + one)));
    if (duplicate(peer, r)) return;
    if (add(peer, r, /*viaLeader=*/true)) ranks.push_back(static_cast<int>(r.rank));
  }
  log::info(0, "rendezvous: host registration from rank {}: {} ranks ({} host registrations)", peer,
            payload.size() / one, received_);
  maybeFinish();
}

// What this rank still waits for, and the rank that names, for a timeout's
// message: its own, or that of a member of its group that gave up first.
std::pair<std::string, int> HostLocal::waitingFor() const {
  if (tree_) return {treeWaitText(), tree_->waiting().front()};
  std::string local = group_ ? group_->describe() : std::string("no host-local group");
  if (cfg_.rank == 0) return {fmt::format("{}; {} host registrations; {}", missingText(), received_, local), -1};
  if (group_ && group_->leader() && !connectedToRoot_) {  // as a rank without aggregation says it
    std::string dial = host_.dialStatus(0);
    return {fmt::format("could not reach the root at {}{}; {}", toString(toEndpoint(cfg_.root)),
                        dial.empty() ? "" : " (" + dial + ")", local),
            0};
  }
  if (!group_ || !group_->leader()) return {local, group_ ? group_->leaderRank() : 0};
  return {sentToRoot_ ? local + "; registered the host with the root, but not all ranks arrived"
                      : local + "; the host is not registered with the root yet",
          0};
}

// A member of this leader's group gave up first (its deadline passed): the
// job cannot complete, and the cause is the wait, not a lost member.
void HostLocal::onMemberLeft(int member, ErrorCode code, const std::string& why, int peer) {
  if (done_) return;
  if (code != ErrorCode::Timeout)
    return stop(code,
                fmt::format("rendezvous failed: rank {} of this host left before the table was out: {}", member, why),
                peer);
  const auto [state, waits] = waitingFor();
  stop(ErrorCode::Timeout,
       fmt::format("rendezvous timed out at rank {} of this host (its deadline passed before the table was out); "
                   "this leader: {}",
                   member, state),
       waits);
}

// A member's table from its leader.
void HostLocal::onTable(int peer, wire::SharedBytes bytes) {
  if (cfg_.rank == 0 || done_) {
    log::warn(cfg_.rank, "ignored an unexpected address table from rank {}", peer);
    return;
  }
  try {
    table_ = wire::AddressTable(bytes, static_cast<std::uint32_t>(cfg_.nranks));
  } catch (const std::exception& e) {
    return stop(ErrorCode::Protocol, fmt::format("rendezvous: a malformed address table: {}", e.what()), peer);
  }
  complete("");
}

// Fails here; a leader tells its host's ranks why, and every rank tells the
// ranks it is connected to (the root: the leaders; a leader: the root).
void HostLocal::stop(ErrorCode code, const std::string& what, int peer) {
  if (done_) return;
  if (group_) group_->abandon(code, what, peer);
  failAll(code, what, peer);
}

std::unique_ptr<Rendezvous> makeHostLocal(Host& host, const Config& config, int localRanks) {
  return std::make_unique<HostLocal>(host, config, localRanks);
}

int hostRegistrationsReceived() { return hostRegistrations.load(); }

}  // namespace tether::rdv
