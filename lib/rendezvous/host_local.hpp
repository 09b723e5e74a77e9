// The host-local rendezvous (TETHER_HOST_LOCAL=1) as one class: its
// registration side (host_local.cpp: the group, the root's host
// registrations, failures) and the table's way down the host leaders' tree
// (host_local_tree.cpp). Internal to the rendezvous layer; made by
// makeHostLocal (rendezvous.hpp). Progress thread only.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/layer.hpp"
#include "rendezvous/host_group.hpp"
#include "rendezvous/leader_tree.hpp"
#include "rendezvous/registration.hpp"

TETHER_LAYER(4, "rendezvous");

namespace tether::rdv {

class HostLocal final : public Registration {
 public:
  HostLocal(Host& host, Config config, int localRanks) : Registration(host, std::move(config)), local_(localRanks) {}
  ~HostLocal() override;
  void start(const PeerAddress& self) override;
  bool onFrame(int peer, wire::Kind kind, wire::SharedBytes payload) override;
  void onLinkUp(int peer) override;
  void onLinkDown(int peer, const std::string& reason, bool graceful) override;
  void onConnectFailed(int peer, const link::ConnectFailure& f) override;
  void onTimeout() override;
  void onAborted(const std::string& why) override;
  PeerAddress address(int rank) const override { return table_.at(static_cast<std::uint32_t>(rank)); }

 private:
  // Registration side (host_local.cpp).
  std::string hostOf(int peer) const;
  bool duplicate(int leader, const wire::Register& r);
  void onLeading();
  void onBatch(std::vector<wire::Register> batch);
  void onHostRegister(int peer, const wire::Bytes& payload);
  // The table's way down the leaders' tree (host_local_tree.cpp).
  void maybeFinish();
  void onLeaderTable(int peer, wire::SharedBytes payload);
  void onTableAck(int peer);
  void maybeTreeDone();
  void onTreeLinkDown(int peer, const std::string& reason, bool graceful);
  void cannotForward(int child, const link::ConnectFailure& f);
  std::string treeWaitText() const;
  // Failures and waits (host_local.cpp).
  std::pair<std::string, int> waitingFor() const;
  void onMemberLeft(int member, ErrorCode code, const std::string& why, int peer);
  void onTable(int peer, wire::SharedBytes bytes);
  void stop(ErrorCode code, const std::string& what, int peer);

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

}  // namespace tether::rdv
