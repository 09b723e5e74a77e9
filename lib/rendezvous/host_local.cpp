// Host-local rendezvous (TETHER_HOST_LOCAL=1): the ranks of each host meet
// over the host's abstract Unix sockets first, in groups of at most
// TETHER_HOST_GROUP_MAX (host_group.hpp); each group's leader registers the
// whole group with the root in one Register frame (the group's Register
// records back to back) and fans the table out over the same sockets. The
// root handles one registration per group (one per host up to that size).
// When the root's group has a leader other than rank 0, that leader registers
// it like any other; when rank 0 leads its group, its members register with
// it directly. docs/scale.md, "Host-local aggregation".
//
// The table goes down a k-nomial tree of the leaders (leader_tree.hpp; radix
// TETHER_RENDEZVOUS_TREE_RADIX): the root sends it to its children only, in
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
#include <map>
#include <optional>
#include <set>

#include "base/endpoint.hpp"
#include "base/join.hpp"
#include "base/log.hpp"
#include "rendezvous/host_group.hpp"
#include "rendezvous/leader_tree.hpp"
#include "rendezvous/registration.hpp"
#include "wire/host_table.hpp"

namespace tether::rdv {
namespace {

std::atomic<int> hostRegistrations{0};
std::atomic<int> rootTables{0};

class HostLocal final : public Registration {
 public:
  HostLocal(Host& host, Config config, int localRanks) : Registration(host, std::move(config)), local_(localRanks) {}
  ~HostLocal() override {
    if (group_) group_->close();
  }

  void start(const PeerAddress& self) override {
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

  bool onFrame(int peer, wire::Kind kind, wire::SharedBytes payload) override {
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

  void onLinkUp(int peer) override {
    if (peer == 0) connectedToRoot_ = true;
    if (peer == 0 && sentToRoot_ && cfg_.rank != 0) host_.phase(Phase::Registered);  // with the batch queued
  }

  void onLinkDown(int peer, const std::string& reason, bool graceful) override {
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

  void onConnectFailed(int peer, const link::ConnectFailure& f) override {
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

  void onTimeout() override {
    if (done_) return;
    const auto [state, peer] = waitingFor();
    stop(ErrorCode::Timeout, fmt::format("rendezvous timed out after {} ms: {}", cfg_.timeout.count(), state), peer);
  }

  // A leader's members hear of the job's abort from it alone.
  void onAborted(const std::string& why) override {
    if (!done_ && group_) group_->abandon(ErrorCode::Aborted, why, cfg_.rank);
  }

  PeerAddress address(int rank) const override { return table_.at(static_cast<std::uint32_t>(rank)); }

 private:
  // " (the host leader of ranks 3, 4, 5)", for the root's messages.
  std::string hostOf(int peer) const {
    auto it = hosts_.find(peer);
    if (it == hosts_.end()) return "";
    return fmt::format(" (the host leader of ranks {})", joined(it->second, ", "));
  }

  // Two groups of one host (or two hosts) registered one rank: each leader
  // checked its own group, only the root sees both. Fails the job at once.
  bool duplicate(int leader, const wire::Register& r) {
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
  void onLeading() {
    if (cfg_.rank == 0 || dialed_) return;
    dialed_ = true;
    host_.connect(0, cfg_.root);
  }

  // The leader's batch: the root adds it; another leader sends it to the root.
  void onBatch(std::vector<wire::Register> batch) {
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
  void onHostRegister(int peer, const wire::Bytes& payload) {
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

  // The root: the table goes to its children in the leaders' tree, and to
  // its own group.
  void maybeFinish() {
    if (done_ || !everyoneRegistered()) return;
    table_ = table();
    std::vector<std::uint32_t> leaders(leaders_.begin(), leaders_.end());  // ascending
    tree_.emplace(leaders, cfg_.treeRadix, 0);
    auto payload = std::make_shared<const wire::Bytes>(
        wire::encodeLeaderTable(static_cast<std::uint32_t>(cfg_.treeRadix), leaders, *table_.encoded()));
    for (int c : tree_->children()) {
      host_.send(c, wire::Kind::Table, payload);
      ++rootTables;
    }
    if (group_) group_->sendTable(table_.encoded());
    forgetRegistrations();
    log::info(0, "rendezvous: the table went to {} of {} host leaders (tree radix {})", tree_->children().size(),
              leaders.size(), cfg_.treeRadix);
    maybeTreeDone();
  }

  // A leader's table from its parent in the leaders' tree: on to its own
  // children (the same bytes) and its group.
  void onLeaderTable(int peer, wire::SharedBytes payload) {
    if (cfg_.rank == 0 || done_ || tree_) {
      log::warn(cfg_.rank, "ignored an unexpected address table from rank {}", peer);
      return;
    }
    wire::LeaderTable t;
    try {
      t = wire::decodeLeaderTable(*payload, static_cast<std::uint32_t>(cfg_.nranks));
      LeaderTree tree(t.leaders, static_cast<int>(t.radix), cfg_.rank);
      if (tree.parent() != peer) {
        log::warn(cfg_.rank,
                  "ignored an address table from rank {} (this rank's parent in the host leaders' tree is "
                  "rank {})",
                  peer, tree.parent());
        return;
      }
      tree_.emplace(std::move(tree));
    } catch (const std::exception& e) {
      return stop(ErrorCode::Protocol,
                  fmt::format("rendezvous: a malformed address table from rank {}: {}", peer, e.what()), peer);
    }
    connectedToRoot_ = connectedToRoot_ || peer == 0;
    table_ = wire::AddressTable(t.table, static_cast<std::uint32_t>(cfg_.nranks));
    for (int c : tree_->children()) {
      host_.connect(c, table_.at(static_cast<std::uint32_t>(c)));
      host_.send(c, wire::Kind::Table, payload);  // sent once the link is up
    }
    if (group_ && group_->leader()) group_->sendTable(table_.encoded());
    maybeTreeDone();
  }

  void onTableAck(int peer) {
    if (done_ || !tree_ || !tree_->acknowledged(peer)) {
      log::warn(cfg_.rank, "ignored an unexpected table acknowledgement from rank {}", peer);
      return;
    }
    maybeTreeDone();
  }

  // Every child's part of the tree holds the table: a leader says so to its
  // parent; the root is done.
  void maybeTreeDone() {
    if (done_ || !tree_->complete()) return;
    if (cfg_.rank != 0) {
      host_.send(tree_->parent(), wire::Kind::TableAck, std::make_shared<const wire::Bytes>());
      return complete("");
    }
    // Every leader is done: the root closes its registration links to them
    // (the idle goodbye; a collective dials again where it needs one), so it
    // does not keep one socket per host group.
    int released = 0;
    for (auto leader : tree_->leaders()) released += host_.release(static_cast<int>(leader)) ? 1 : 0;
    complete(
        fmt::format(" (host-local: {} host registrations; the table down a tree of {} leaders, radix {}; "
                    "{} registration links released)",
                    received_, tree_->leaders().size(), tree_->radix(), released));
  }

  // A leader below this rank lost before its part of the tree acknowledged
  // (the root sees every leader: each keeps its registration link). A rank
  // below a child may leave once it is done, before the child's answer.
  void onTreeLinkDown(int peer, const std::string& reason, bool graceful) {
    if (!tree_->pending(peer) || (graceful && !tree_->isChild(peer))) return;
    const std::string who = fmt::format("rank {}{}", peer, cfg_.rank == 0 ? hostOf(peer) : " (a child host leader)");
    const std::string before = "before its part of the host leaders' tree acknowledged the table";
    if (graceful) return stop(ErrorCode::PeerLost, fmt::format("rendezvous failed: {} left {}", who, before), peer);
    stop(ErrorCode::PeerLost, fmt::format("rendezvous failed: lost {} {}: {}", who, before, reason), peer);
  }

  void cannotForward(int child, const link::ConnectFailure& f) {
    stop(f.retriesExhausted ? ErrorCode::Timeout : ErrorCode::PeerLost,
         fmt::format("rendezvous: cannot forward the table to the child host leader rank {} at {} ({} attempts; "
                     "last: {})",
                     child, toString(toEndpoint(table_.at(static_cast<std::uint32_t>(child)))), f.attempts, f.reason),
         child);
  }

  // What this rank still waits for, and the rank that names, for a timeout's
  // message: its own, or that of a member of its group that gave up first.
  std::pair<std::string, int> waitingFor() const {
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
  void onMemberLeft(int member, ErrorCode code, const std::string& why, int peer) {
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

  // Names each child that has not answered, with how the dial to it goes
  // if it still retries (a leader dials its children; the root's are up).
  std::string treeWaitText() const {
    std::vector<std::string> waiting;
    for (int c : tree_->waiting()) {
      const std::string dial = host_.dialStatus(c);
      waiting.push_back(dial.empty() ? std::to_string(c) : fmt::format("{} (not reached: {})", c, dial));
    }
    return fmt::format("{}; no acknowledgement from the child host leaders {} (tree of {} leaders, radix {})",
                       cfg_.rank == 0 ? "the table is out" : "forwarding the table", joined(waiting, ", "),
                       tree_->leaders().size(), tree_->radix());
  }

  // A member's table from its leader.
  void onTable(int peer, wire::SharedBytes bytes) {
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
  void stop(ErrorCode code, const std::string& what, int peer) {
    if (done_) return;
    if (group_) group_->abandon(code, what, peer);
    failAll(code, what, peer);
  }

  const int local_;
  std::shared_ptr<HostGroup> group_;
  wire::AddressTable table_;
  std::optional<LeaderTree> tree_;         // once the table is out (the root) or has come (a leader)
  std::set<int> leaders_;                  // the root's: leaders that registered a host
  std::map<int, std::vector<int>> hosts_;  // the root's: leader -> its host's ranks
  int received_ = 0;                       // the root's host registrations
  bool dialed_ = false;
  bool sentToRoot_ = false;
  bool connectedToRoot_ = false;
};

}  // namespace

std::unique_ptr<Rendezvous> makeHostLocal(Host& host, const Config& config, int localRanks) {
  return std::make_unique<HostLocal>(host, config, localRanks);
}

int hostRegistrationsReceived() { return hostRegistrations.load(); }

int tablesSentByRoot() { return rootTables.load(); }

}  // namespace tether::rdv
