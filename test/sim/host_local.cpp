// Host-local aggregation (issue 18 item 1; lib/rendezvous/host_local.cpp),
// modelled for the simulator: the ranks of a host register with their host's
// leader (its first rank) over a local link; each leader sends its host's R
// addresses to the root in one message; once every host is in, the root sends
// the whole table to every leader (with --table-tree=false: a star of H - 1
// copies, as the code did before the leader tree, keeping the leaders' links) and each leader hands it to its own ranks. So
// the root reads H - 1 host registrations and R - 1 local ones instead of
// N - 1. In the real code the first rank to bind the host's socket leads it;
// here the host's first rank does (rank 0 on the root's host).
//
// Params::tableTree (the default, what the code does: lib/rendezvous/leader_tree.*): the table goes
// down a k-nomial tree of the leaders instead (radix Params::hostTreeRadix,
// tether's tree rendezvous' default); as in the tree rendezvous the root then
// releases the registration links of leaders that are not its children and
// is done when they have closed. A leader is done when it holds the table and
// its child leaders' links are up; any other rank when it holds the table.
#include <optional>

#include "rendezvous_run.hpp"

namespace tether::sim {
namespace {

class HostLocal final : public rdv::Rendezvous {
 public:
  HostLocal(rdv::Host& host, const rdv::Config& config, const Params& params)
      : host_(host),
        cfg_(config),
        params_(params),
        perHost_(params.ranksPerHost),
        hosts_(config.nranks / params.ranksPerHost),
        hostIndex_(config.rank / params.ranksPerHost),
        leader_(hostIndex_ * perHost_) {
    if (!isLeader()) return;
    if (params.tableTree)
      for (int c : rdv::treeChildren(hostIndex_, hosts_, params.hostTreeRadix)) childLeaders_.push_back(c * perHost_);
    else if (config.rank == 0)
      for (int h = 1; h < hosts_; ++h) childLeaders_.push_back(h * perHost_);
    // Registrations may come before this rank starts (the start spread).
    entries_.assign(static_cast<std::size_t>(config.rank == 0 ? config.nranks : perHost_), PeerAddress{});
  }

  void start(const PeerAddress& self) override {
    if (!isLeader()) {  // "the host-local stream": the leader's address follows from the host, no table needed
      host_.connect(leader_, simAddress(leader_, params_));
      wire::Register reg{static_cast<std::uint32_t>(cfg_.rank), self};
      host_.send(leader_, wire::Kind::Register, std::make_shared<const wire::Bytes>(wire::encode(reg)));
      return;
    }
    entries_[0] = self;
    ++arrived_;
    maybeHostComplete();
  }

  bool onFrame(int peer, wire::Kind kind, wire::SharedBytes payload) override {
    if (kind == wire::Kind::Register && isLeader()) {
      if (peer / perHost_ == hostIndex_) {  // one of this host's ranks
        const wire::Register reg = wire::decodeRegister(*payload);
        entries_.at(reg.rank - static_cast<std::uint32_t>(leader_)) = reg.address;
        ++arrived_;
      } else {  // the root: a whole host, its R addresses in rank order
        const wire::AddressTable part(std::move(payload), static_cast<std::uint32_t>(perHost_));
        for (int i = 0; i < perHost_; ++i)
          entries_.at(static_cast<std::size_t>(peer + i)) = part.at(static_cast<std::uint32_t>(i));
        arrived_ += perHost_;
      }
      maybeHostComplete();
      return true;
    }
    if (kind == wire::Kind::Table && cfg_.rank != 0 && !table_) {
      table_.emplace(std::move(payload), static_cast<std::uint32_t>(cfg_.nranks));
      if (isLeader()) {
        for (int c : childLeaders_) {
          host_.connect(c, table_->at(static_cast<std::uint32_t>(c)));
          host_.send(c, wire::Kind::Table, table_->encoded());
        }
        handToLocals();
      }
      maybeDone();
      return true;
    }
    return false;
  }

  void onLinkUp(int peer) override {
    if (table_ && isChildLeader(peer)) {
      ++childrenUp_;
      maybeDone();
    }
  }
  void onLinkDown(int, const std::string&, bool) override {
    if (cfg_.rank == 0 && table_ && --releasing_ == 0) maybeDone();
  }
  void onConnectFailed(int, const link::ConnectFailure&) override {}
  void onRefused(const link::Refusal&) override {}
  void onDuplicateClaim(int, const std::string&) override {}
  void onTimeout() override {}

  bool done() const override { return done_; }
  PeerAddress address(int rank) const override { return table_->at(static_cast<std::uint32_t>(rank)); }

 private:
  bool isLeader() const { return cfg_.rank == leader_; }
  bool isChildLeader(int peer) const {
    for (int c : childLeaders_)
      if (c == peer) return true;
    return false;
  }

  void maybeHostComplete() {
    if (cfg_.rank != 0) {
      if (arrived_ != perHost_) return;
      host_.connect(0, cfg_.root);  // one registration for the whole host
      host_.send(0, wire::Kind::Register, wire::AddressTable(entries_).encoded());
      std::vector<PeerAddress>().swap(entries_);
      return;
    }
    if (arrived_ != cfg_.nranks) return;
    table_.emplace(entries_);
    std::vector<PeerAddress>().swap(entries_);
    for (int c : childLeaders_) host_.send(c, wire::Kind::Table, table_->encoded());
    handToLocals();
    if (params_.tableTree)
      for (int h = 1; h < hosts_; ++h)  // the registration links of leaders that are not children
        if (!isChildLeader(h * perHost_) && host_.release(h * perHost_)) ++releasing_;
    childrenUp_ = static_cast<int>(childLeaders_.size());  // their registration links are up
    maybeDone();
  }

  void handToLocals() {
    for (int i = 1; i < perHost_; ++i) host_.send(leader_ + i, wire::Kind::Table, table_->encoded());
  }

  void maybeDone() {
    if (done_ || !table_) return;
    if (isLeader() && childrenUp_ < static_cast<int>(childLeaders_.size())) return;
    if (cfg_.rank == 0 && releasing_ > 0) return;
    done_ = true;
    host_.finished(nullptr);
  }

  rdv::Host& host_;
  const rdv::Config cfg_;
  const Params params_;
  const int perHost_, hosts_, hostIndex_, leader_;
  std::vector<int> childLeaders_;     // leaders' ranks, the largest subtrees first
  std::vector<PeerAddress> entries_;  // a leader's, until it registers (the root's: all N)
  int arrived_ = 0;
  int childrenUp_ = 0;
  int releasing_ = 0;  // the root's released links not closed yet
  std::optional<wire::AddressTable> table_;
  bool done_ = false;
};

}  // namespace

std::unique_ptr<rdv::Rendezvous> makeHostLocal(rdv::Host& host, const rdv::Config& config, const Params& params) {
  return std::make_unique<HostLocal>(host, config, params);
}

}  // namespace tether::sim
