// Host-local rendezvous: the table's way down the host leaders' k-nomial
// tree (host_local.cpp's header comment tells the whole protocol): the root
// sends it to its children, each leader forwards the same bytes to its own
// and to its group, and acknowledgements come back up.

#include <fmt/format.h>

#include <atomic>

#include "base/endpoint.hpp"
#include "base/join.hpp"
#include "base/log.hpp"
#include "rendezvous/host_local.hpp"
#include "wire/host_table.hpp"

namespace tether::rdv {

namespace {

std::atomic<int> rootTables{0};

}  // namespace

// The root: the table goes to its children in the leaders' tree, and to
// its own group.
void HostLocal::maybeFinish() {
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
void HostLocal::onLeaderTable(int peer, wire::SharedBytes payload) {
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

void HostLocal::onTableAck(int peer) {
  if (done_ || !tree_ || !tree_->acknowledged(peer)) {
    log::warn(cfg_.rank, "ignored an unexpected table acknowledgement from rank {}", peer);
    return;
  }
  maybeTreeDone();
}

// Every child's part of the tree holds the table: a leader says so to its
// parent; the root is done.
void HostLocal::maybeTreeDone() {
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
void HostLocal::onTreeLinkDown(int peer, const std::string& reason, bool graceful) {
  if (!tree_->pending(peer) || (graceful && !tree_->isChild(peer))) return;
  const std::string who = fmt::format("rank {}{}", peer, cfg_.rank == 0 ? hostOf(peer) : " (a child host leader)");
  const std::string before = "before its part of the host leaders' tree acknowledged the table";
  if (graceful) return stop(ErrorCode::PeerLost, fmt::format("rendezvous failed: {} left {}", who, before), peer);
  stop(ErrorCode::PeerLost, fmt::format("rendezvous failed: lost {} {}: {}", who, before, reason), peer);
}

void HostLocal::cannotForward(int child, const link::ConnectFailure& f) {
  stop(f.retriesExhausted ? ErrorCode::Timeout : ErrorCode::PeerLost,
       fmt::format("rendezvous: cannot forward the table to the child host leader rank {} at {} ({} attempts; "
                   "last: {})",
                   child, toString(toEndpoint(table_.at(static_cast<std::uint32_t>(child)))), f.attempts, f.reason),
       child);
}

// Names each child that has not answered, with how the dial to it goes
// if it still retries (a leader dials its children; the root's are up).
std::string HostLocal::treeWaitText() const {
  std::vector<std::string> waiting;
  for (int c : tree_->waiting()) {
    const std::string dial = host_.dialStatus(c);
    waiting.push_back(dial.empty() ? std::to_string(c) : fmt::format("{} (not reached: {})", c, dial));
  }
  return fmt::format("{}; no acknowledgement from the child host leaders {} (tree of {} leaders, radix {})",
                     cfg_.rank == 0 ? "the table is out" : "forwarding the table", joined(waiting, ", "),
                     tree_->leaders().size(), tree_->radix());
}

int tablesSentByRoot() { return rootTables.load(); }

}  // namespace tether::rdv
