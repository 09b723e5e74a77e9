// What the root star and the tree share: the root's registration table (who
// registered, at which address; who was refused) and the ways a rendezvous
// ends (complete; fail here; fail and tell every connected rank why). Each
// implementation derives from Registration and adds its own protocol.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "base/layer.hpp"
#include "rendezvous/rendezvous.hpp"
#include "tether/error.hpp"

TETHER_LAYER(4, "rendezvous");

namespace tether::rdv {

class Registration : public Rendezvous {
 public:
  // A configuration error that retrying cannot fix fails at once (another
  // world size, two processes claiming one rank); a wrong secret is only
  // named when the deadline passes (see onRefused in registration.cpp).
  void onRefused(const link::Refusal& refusal) override;
  void onDuplicateClaim(int peer, const std::string& remote) override;
  bool done() const override { return done_; }

 protected:
  // Only the root keeps a slot per rank (at 131,072 ranks, a table's worth
  // of memory at every rank would be 5 MB each for nothing).
  Registration(Host& host, Config config);

  // The root registers itself first.
  void registerSelf(const PeerAddress& self);
  // A rank other than the root dials it and queues its registration, sent
  // once the link is up (the root star and the tree begin so).
  void registerWithRoot(const PeerAddress& self);
  // The frames the root star and the tree take: a rank's registration (at
  // the root) and the address table, to `protocol`'s onRegister and
  // onTable; false for any other kind.
  template <class Protocol>
  bool registrationFrame(Protocol& protocol, int peer, wire::Kind kind, wire::SharedBytes payload) {
    if (kind == wire::Kind::Register) {
      protocol.onRegister(peer, wire::decodeRegister(*payload));
      return true;
    }
    if (kind == wire::Kind::Table) {
      protocol.onTable(peer, wire::AddressTable(std::move(payload), static_cast<std::uint32_t>(cfg_.nranks)));
      return true;
    }
    return false;
  }
  // Records a registration; false (logged, ignored) if it is not the root,
  // the claim does not match the link's rank (unless `viaLeader`: a host
  // leader registers its host's ranks), or the rank registered already.
  bool add(int peer, const wire::Register& r, bool viaLeader = false);
  bool everyoneRegistered() const { return registeredCount_ == cfg_.nranks; }
  // The root: `rank` registered already (a second claim of it is a duplicate).
  bool registered(int rank) const {
    return rank >= 0 && rank < static_cast<int>(registered_.size()) && registered_[rank].has_value();
  }
  // Every address, in rank order (when everyoneRegistered()).
  wire::AddressTable table() const;
  // Frees the root's slots once the table is out.
  void forgetRegistrations();
  // "N of M ranks registered; missing ranks: ...[; refused meanwhile: ...]".
  std::string missingText() const;

  void complete(const std::string& how);
  void fail(ErrorCode code, const std::string& what, int peer);
  // The root: fail here and tell the ranks that did register why, instead of
  // letting them wait for their own deadline.
  void failAll(ErrorCode code, const std::string& what, int peer);

  Host& host_;
  const Config cfg_;
  bool done_ = false;

 private:
  std::vector<std::optional<PeerAddress>> registered_;
  int registeredCount_ = 0;
  std::vector<std::string> refusals_;
  // The root: when it registered itself, and the last registration (the
  // link it came on: the rank, or its host leader), for the INFO log.
  std::chrono::steady_clock::time_point selfAt_, lastAt_;
  int lastPeer_ = -1;
};

}  // namespace tether::rdv
