// Root-star rendezvous: every rank dials the root (rank 0, at the UniqueId's
// address) over what becomes their ordinary link, registers its listen
// address, and waits for the table of all addresses. The root answers when
// all ranks have registered. Links between other ranks open lazily later.
#include <fmt/format.h>

#include "base/endpoint.hpp"
#include "base/log.hpp"
#include "rendezvous/registration.hpp"
#include "wire/handshake.hpp"

namespace tether::rdv {
namespace {

class RootStar final : public Registration {
  friend class Registration;  // registrationFrame calls onRegister and onTable

 public:
  RootStar(Host& host, Config config) : Registration(host, std::move(config)) {}

  void start(const PeerAddress& self) override {
    if (cfg_.rank == 0) {
      registerSelf(self);
      if (cfg_.nranks == 1) {
        table_ = table();
        complete("");
      }
      return;
    }
    registerWithRoot(self);
  }

  bool onFrame(int peer, wire::Kind kind, wire::SharedBytes payload) override {
    return registrationFrame(*this, peer, kind, std::move(payload));
  }

  void onLinkUp(int peer) override {
    if (peer != 0) return;
    connectedToRoot_ = true;
    if (cfg_.rank != 0) host_.phase(Phase::Registered);  // the queued registration goes first
  }

  void onLinkDown(int peer, const std::string& reason, bool graceful) override {
    if (done_) return;
    if (cfg_.rank != 0) {
      if (peer == 0) fail(ErrorCode::PeerLost, fmt::format("rendezvous: lost the root (rank 0): {}", reason), 0);
      return;
    }
    if (graceful) {
      // A rank that gave up (its own deadline, or told to stop) is not the
      // cause: the ranks that never arrived are.
      failAll(ErrorCode::PeerLost,
              fmt::format("rendezvous failed: rank {} left before the table was sent; {}", peer, missingText()), peer);
      return;
    }
    failAll(ErrorCode::PeerLost, fmt::format("rendezvous failed: lost rank {}: {}", peer, reason), peer);
  }

  void onConnectFailed(int peer, const link::ConnectFailure& f) override {
    if (done_ || peer != 0 || cfg_.rank == 0) return;
    if (f.retriesExhausted)
      fail(ErrorCode::Timeout,
           fmt::format("rendezvous timed out after {} ms: could not reach the root at {} ({} attempts; last: {})",
                       cfg_.timeout.count(), toString(toEndpoint(cfg_.root)), f.attempts, f.reason),
           0);
    else if (f.refused &&
             !f.peerClosing)  // a configuration error here (another job's id, world size): retrying cannot help
      fail(ErrorCode::InvalidArgument, fmt::format("rendezvous: refused by the root: {}", f.reason), 0);
    else
      fail(ErrorCode::PeerLost, fmt::format("rendezvous: cannot reach the root: {}", f.reason), 0);
  }

  void onTimeout() override {
    if (done_) return;
    if (cfg_.rank == 0)
      return failAll(ErrorCode::Timeout,
                     fmt::format("rendezvous timed out after {} ms: {}", cfg_.timeout.count(), missingText()), -1);
    std::string dial = connectedToRoot_ ? "" : host_.dialStatus(0);
    fail(ErrorCode::Timeout,
         fmt::format(
             "rendezvous timed out after {} ms: {} (root at {}{})", cfg_.timeout.count(),
             connectedToRoot_ ? "registered with the root, but not all ranks arrived" : "could not reach the root",
             toString(toEndpoint(cfg_.root)), dial.empty() ? "" : "; " + dial),
         0);
  }

  PeerAddress address(int rank) const override { return table_.at(static_cast<std::uint32_t>(rank)); }

 private:
  void onRegister(int peer, const wire::Register& r) {
    if (done_) return;  // failed meanwhile: its abort notice is on the way to the registrant
    if (!add(peer, r) || !everyoneRegistered()) return;
    table_ = table();
    for (int p = 1; p < cfg_.nranks; ++p) host_.send(p, wire::Kind::Table, table_.encoded());
    complete("");
  }

  void onTable(int peer, wire::AddressTable table) {
    if (cfg_.rank == 0 || peer != 0 || done_) {
      log::warn(cfg_.rank, "ignored an unexpected address table from rank {}", peer);
      return;
    }
    connectedToRoot_ = true;
    table_ = std::move(table);
    complete("");
  }

  wire::AddressTable table_;
  bool connectedToRoot_ = false;
};

}  // namespace

std::unique_ptr<Rendezvous> makeRootStar(Host& host, const Config& config) {
  return std::make_unique<RootStar>(host, config);
}

}  // namespace tether::rdv
