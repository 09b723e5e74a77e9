// Root-star rendezvous: every rank dials the root (rank 0, at the UniqueId's
// address) over what becomes their ordinary link, registers its listen
// address, and waits for the table of all addresses. The root answers when
// all ranks have registered. Links between other ranks open lazily later.
#include <fmt/format.h>

#include <optional>

#include "base/endpoint.hpp"
#include "base/join.hpp"
#include "base/log.hpp"
#include "rendezvous/refusal.hpp"
#include "rendezvous/rendezvous.hpp"
#include "tether/error.hpp"
#include "wire/handshake.hpp"

namespace tether::rdv {
namespace {

class RootStar final : public Rendezvous {
 public:
  // Only the root keeps a slot per rank (at 131,072 ranks, a table's worth
  // of memory at every rank would be 5 MB each for nothing).
  RootStar(Host& host, Config config)
      : host_(host), cfg_(std::move(config)), registered_(cfg_.rank == 0 ? cfg_.nranks : 0) {}

  void start(const PeerAddress& self) override {
    if (cfg_.rank == 0) {
      registered_[0] = self;
      registeredCount_ = 1;
      if (cfg_.nranks == 1) {
        table_ = wire::AddressTable(std::vector<PeerAddress>{self});
        complete();
      }
      return;
    }
    wire::Register reg{static_cast<std::uint32_t>(cfg_.rank), self};
    host_.connect(0, cfg_.root);
    host_.send(0, wire::Kind::Register, std::make_shared<const wire::Bytes>(wire::encode(reg)));  // sent once up
  }

  bool onFrame(int peer, wire::Kind kind, wire::SharedBytes payload) override {
    if (kind == wire::Kind::Register) {
      onRegister(peer, wire::decodeRegister(*payload));
      return true;
    }
    if (kind == wire::Kind::Table) {
      onTable(peer, wire::AddressTable(std::move(payload), static_cast<std::uint32_t>(cfg_.nranks)));
      return true;
    }
    return false;
  }

  void onLinkUp(int peer) override {
    if (peer == 0) connectedToRoot_ = true;
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

  void onRefused(const link::Refusal& r) override {
    if (done_ || cfg_.rank != 0) return;
    std::string what = fmt::format("rank {} refused: {}, from {}", r.claimedRank, refusalText(r.code), r.remote);
    refusals_.push_back(what);
    // A valid proof of the secret with another world size comes from this
    // job (nobody else knows the secret), misconfigured: say so now instead of
    // waiting out the deadline. A wrong secret proves nothing about who sent
    // it, so it must not stop the job (a stranger could): it is named when
    // the rendezvous times out.
    if (r.code == wire::RejectCode::WrongWorld)
      failAll(ErrorCode::InvalidArgument, "rendezvous failed: " + what, r.claimedRank);
  }

  void onDuplicateClaim(int peer, const std::string& remote) override {
    if (done_ || cfg_.rank != 0) return;
    failAll(ErrorCode::InvalidArgument,
            fmt::format("rendezvous failed: two processes claim rank {} (second from {})", peer, remote), peer);
  }

  void onTimeout() override {
    if (done_) return;
    if (cfg_.rank == 0)
      return failAll(ErrorCode::Timeout,
                     fmt::format("rendezvous timed out after {} ms: {}", cfg_.timeout.count(), missingText()), -1);
    fail(ErrorCode::Timeout,
         fmt::format(
             "rendezvous timed out after {} ms: {} (root at {})", cfg_.timeout.count(),
             connectedToRoot_ ? "registered with the root, but not all ranks arrived" : "could not reach the root",
             toString(toEndpoint(cfg_.root))),
         0);
  }

  bool done() const override { return done_; }
  PeerAddress address(int rank) const override { return table_.at(static_cast<std::uint32_t>(rank)); }

 private:
  void onRegister(int peer, const wire::Register& r) {
    if (done_) return;  // failed meanwhile: its abort notice is on the way to the registrant
    if (cfg_.rank != 0 || static_cast<int>(r.rank) != peer || registered_[peer]) {
      log::warn(cfg_.rank, "ignored an unexpected registration from rank {} (claims rank {})", peer, r.rank);
      return;
    }
    registered_[peer] = r.address;
    ++registeredCount_;
    log::trace(cfg_.rank, "rank {} registered ({}/{})", peer, registeredCount_, cfg_.nranks);
    if (registeredCount_ < cfg_.nranks) return;
    std::vector<PeerAddress> all;
    for (auto& a : registered_) all.push_back(*a);
    table_ = wire::AddressTable(all);
    for (int p = 1; p < cfg_.nranks; ++p) host_.send(p, wire::Kind::Table, table_.encoded());
    complete();
  }

  void onTable(int peer, wire::AddressTable table) {
    if (cfg_.rank == 0 || peer != 0 || done_) {
      log::warn(cfg_.rank, "ignored an unexpected address table from rank {}", peer);
      return;
    }
    connectedToRoot_ = true;
    table_ = std::move(table);
    complete();
  }

  std::string missingText() const {
    std::vector<int> missing;
    for (int r = 0; r < cfg_.nranks; ++r)
      if (!registered_[r]) missing.push_back(r);
    std::string text = fmt::format("{} of {} ranks registered; missing ranks: {}", registeredCount_, cfg_.nranks,
                                   joined(missing, ", "));
    if (!refusals_.empty()) text += fmt::format("; refused meanwhile: {}", joined(refusals_, "; "));
    return text;
  }

  void complete() {
    if (cfg_.rank == 0) log::info(0, "rendezvous complete: {} ranks", cfg_.nranks);
    done_ = true;
    host_.finished(nullptr);
  }

  void fail(ErrorCode code, const std::string& what, int peer) {
    done_ = true;
    host_.finished(std::make_exception_ptr(Error(code, fmt::format("rank {}: {}", cfg_.rank, what), cfg_.rank, peer)));
  }

  // The root: fail here and tell the ranks that did register why, instead
  // of letting them wait for their own deadline.
  void failAll(ErrorCode code, const std::string& what, int peer) {
    fail(code, what, peer);
    host_.abortAll(what);
  }

  Host& host_;
  const Config cfg_;
  std::vector<std::optional<PeerAddress>> registered_;
  int registeredCount_ = 0;
  wire::AddressTable table_;
  std::vector<std::string> refusals_;
  bool connectedToRoot_ = false;
  bool done_ = false;
};

}  // namespace

std::unique_ptr<Rendezvous> makeRootStar(Host& host, const Config& config) {
  return std::make_unique<RootStar>(host, config);
}

}  // namespace tether::rdv
