// The anchor's rendezvous, modelled beside tether's: a star in which one
// server (rank 0) collects every rank's address and answers every rank with
// the whole table (the PMI/KVS server or root process of the runtimes tether
// is compared with). Written for the simulator from that description only:
// ranks keep the table as received and read entries when asked.
#include <optional>

#include "rendezvous_run.hpp"

namespace tether::sim {
namespace {

class AnchorStar final : public rdv::Rendezvous {
 public:
  AnchorStar(rdv::Host& host, const rdv::Config& config) : host_(host), cfg_(config) {}

  void start(const PeerAddress& self) override {
    if (cfg_.rank == 0) {
      entries_.assign(static_cast<std::size_t>(cfg_.nranks), PeerAddress{});
      entries_[0] = self;
      if (++arrived_ == cfg_.nranks) answer();
      return;
    }
    host_.connect(0, cfg_.root);
    wire::Register reg{static_cast<std::uint32_t>(cfg_.rank), self};
    host_.send(0, wire::Kind::Register, std::make_shared<const wire::Bytes>(wire::encode(reg)));
  }

  bool onFrame(int, wire::Kind kind, wire::SharedBytes payload) override {
    if (kind == wire::Kind::Register && cfg_.rank == 0) {
      const wire::Register reg = wire::decodeRegister(*payload);
      entries_.at(reg.rank) = reg.address;
      if (++arrived_ == cfg_.nranks) answer();
      return true;
    }
    if (kind == wire::Kind::Table && cfg_.rank != 0) {
      encoded_ = std::move(payload);
      finish();
      return true;
    }
    return false;
  }

  void onLinkUp(int) override {}
  void onLinkDown(int, const std::string&, bool) override {}
  void onConnectFailed(int, const link::ConnectFailure&) override {}
  void onRefused(const link::Refusal&) override {}
  void onDuplicateClaim(int, const std::string&) override {}
  void onTimeout() override {}

  bool done() const override { return done_; }
  PeerAddress address(int rank) const override {
    if (!table_) table_.emplace(encoded_, static_cast<std::uint32_t>(cfg_.nranks));
    return table_->at(static_cast<std::uint32_t>(rank));
  }

 private:
  void answer() {
    encoded_ = wire::AddressTable(entries_).encoded();
    std::vector<PeerAddress>().swap(entries_);
    for (int p = 1; p < cfg_.nranks; ++p) host_.send(p, wire::Kind::Table, encoded_);
    finish();
  }

  void finish() {
    done_ = true;
    host_.finished(nullptr);
  }

  rdv::Host& host_;
  const rdv::Config cfg_;
  std::vector<PeerAddress> entries_;  // the server, until it answers
  int arrived_ = 0;
  wire::SharedBytes encoded_;
  mutable std::optional<wire::AddressTable> table_;
  bool done_ = false;
};

}  // namespace

std::unique_ptr<rdv::Rendezvous> makeAnchorStar(rdv::Host& host, const rdv::Config& config) {
  return std::make_unique<AnchorStar>(host, config);
}

}  // namespace tether::sim
