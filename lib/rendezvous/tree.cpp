// Tree rendezvous: every rank registers with the root (rank 0) as in the root
// star, but the root sends the table only to its children in a k-nomial tree
// (radix TcpOptions::rendezvousTreeRadix, default 8) and each rank forwards it to its own
// children by dialling them. The whole table travels on every tree edge (each
// rank needs every address), so the root sends (k-1)*ceil(log_k N) copies
// instead of N-1: O(N log N) bytes instead of O(N^2). Once the table is out
// the root releases (idle-closes, with the ordinary goodbye) its registration
// links to ranks that are not its children and is done when they have closed,
// so after init it holds only its tree links. A rank is done when it holds the table and the links to its
// children are up (so a child it cannot reach is named here, as the rank that
// failed to forward).
#include <fmt/format.h>

#include "base/endpoint.hpp"
#include "base/join.hpp"
#include "base/log.hpp"
#include "rendezvous/registration.hpp"
#include "wire/handshake.hpp"

namespace tether::rdv {

int treeParent(int rank, int radix) {
  if (rank == 0) return -1;
  for (long s = 1;; s *= radix)
    if (long digit = (rank / s) % radix; digit != 0) return static_cast<int>(rank - digit * s);
}

std::vector<int> treeChildren(int rank, int nranks, int radix) {
  // A rank's children differ from it in one digit below its lowest non-zero
  // digit (in any digit, for the root); the largest subtrees first.
  long limit = nranks;
  if (rank != 0)
    for (limit = 1; (rank / limit) % radix == 0; limit *= radix) {
    }
  std::vector<long> places;
  for (long s = 1; s < limit; s *= radix) places.push_back(s);
  std::vector<int> out;
  for (auto it = places.rbegin(); it != places.rend(); ++it)
    for (long j = 1; j < radix; ++j)
      if (long c = rank + j * *it; c < nranks) out.push_back(static_cast<int>(c));
  return out;
}

namespace {

class Tree final : public Registration {
  friend class Registration;  // registrationFrame calls onRegister and onTable

 public:
  Tree(Host& host, Config config, int radix)
      : Registration(host, std::move(config)),
        radix_(radix),
        parent_(treeParent(cfg_.rank, radix)),
        children_(treeChildren(cfg_.rank, cfg_.nranks, radix)) {}

  void start(const PeerAddress& self) override {
    if (cfg_.rank == 0) {
      registerSelf(self);
      if (cfg_.nranks == 1) {
        table_ = table();
        complete();
      }
      return;
    }
    registerWithRoot(self);
  }

  bool onFrame(int peer, wire::Kind kind, wire::SharedBytes payload) override {
    return registrationFrame(*this, peer, kind, std::move(payload));
  }

  void onLinkUp(int peer) override {
    if (peer == 0) connectedToRoot_ = true;
    if (peer == 0 && cfg_.rank != 0 && !done_) host_.phase(Phase::Registered);  // the queued registration goes first
    // A rank below the root counts its children's links (childUp_); the root
    // sends its children the table over their registration links, and one
    // that comes up again later (the budget closed it, the table's send
    // dialled it anew) changes nothing there.
    if (cfg_.rank != 0 && haveTable_ && isChild(peer) && !childUp_[index(peer)]) {
      childUp_[index(peer)] = 1;
      ++childrenUp_;
      maybeComplete();
    }
  }

  void onLinkDown(int peer, const std::string& reason, bool graceful) override {
    if (done_) return;
    if (cfg_.rank == 0) {
      if (haveTable_) {  // a released link closed (or broke: the rank is dialled again when needed)
        if (released_[peer]) released_[peer] = 0, --releasing_;
        if (releasing_ == 0) complete();
        return;
      }
      if (graceful)
        return failAll(
            ErrorCode::PeerLost,
            fmt::format("rendezvous failed: rank {} left before the table was sent; {}", peer, missingText()), peer);
      return failAll(ErrorCode::PeerLost, fmt::format("rendezvous failed: lost rank {}: {}", peer, reason), peer);
    }
    // The root idle-closes the registration link of a rank that is not its
    // child (graceful): the table then comes from the parent.
    if (peer == 0 && !graceful && !haveTable_)
      return fail(ErrorCode::PeerLost, fmt::format("rendezvous: lost the root (rank 0): {}", reason), 0);
    if (peer == parent_ && !haveTable_ && !graceful)
      return fail(ErrorCode::PeerLost,
                  fmt::format("rendezvous: lost the parent (rank {}) before its table arrived: {}", peer, reason),
                  peer);
    if (haveTable_ && isChild(peer))
      fail(ErrorCode::PeerLost,
           fmt::format("rendezvous: lost the child rank {} while forwarding the table: {}", peer, reason), peer);
  }

  void onConnectFailed(int peer, const link::ConnectFailure& f) override {
    if (done_ || cfg_.rank == 0) return;
    if (peer == 0 && !connectedToRoot_) {
      if (f.retriesExhausted)
        return fail(ErrorCode::Timeout,
                    fmt::format("rendezvous timed out after {} ms: could not reach the root at {} ({} attempts; "
                                "last: {})",
                                cfg_.timeout.count(), toString(toEndpoint(cfg_.root)), f.attempts, f.reason),
                    0);
      return fail(ErrorCode::PeerLost, fmt::format("rendezvous: cannot reach the root: {}", f.reason), 0);
    }
    if (haveTable_ && isChild(peer))
      fail(f.retriesExhausted ? ErrorCode::Timeout : ErrorCode::PeerLost,
           fmt::format("rendezvous: cannot forward the table to the child rank {} at {} ({} attempts; last: {})", peer,
                       toString(toEndpoint(table_.at(static_cast<std::uint32_t>(peer)))), f.attempts, f.reason),
           peer);
  }

  void onTimeout() override {
    if (done_) return;
    if (cfg_.rank == 0 && haveTable_) {
      std::vector<int> open;
      for (int p = 0; p < cfg_.nranks; ++p)
        if (released_[p]) open.push_back(p);
      return fail(ErrorCode::Timeout,
                  fmt::format("rendezvous timed out after {} ms: the table is out, but the released links to ranks "
                              "{} did not close",
                              cfg_.timeout.count(), joined(open, ", ")),
                  open.empty() ? -1 : open.front());
    }
    if (cfg_.rank == 0)
      return failAll(ErrorCode::Timeout,
                     fmt::format("rendezvous timed out after {} ms: {}", cfg_.timeout.count(), missingText()), -1);
    if (!connectedToRoot_) {
      std::string dial = host_.dialStatus(0);
      return fail(
          ErrorCode::Timeout,
          fmt::format("rendezvous timed out after {} ms: could not reach the root at {}{}", cfg_.timeout.count(),
                      toString(toEndpoint(cfg_.root)), dial.empty() ? "" : " (" + dial + ")"),
          0);
    }
    if (!haveTable_)
      return fail(ErrorCode::Timeout,
                  fmt::format("rendezvous timed out after {} ms: registered with the root, but the table never came "
                              "from the parent rank {} (tree radix {}; not all ranks arrived, or the parent failed)",
                              cfg_.timeout.count(), parent_, radix_),
                  parent_);
    std::vector<int> down;
    for (std::size_t i = 0; i < children_.size(); ++i)
      if (!childUp_[i]) down.push_back(children_[i]);
    fail(ErrorCode::Timeout,
         fmt::format("rendezvous timed out after {} ms forwarding the table: no link to the child ranks {}",
                     cfg_.timeout.count(), joined(down, ", ")),
         down.empty() ? -1 : down.front());
  }

  PeerAddress address(int rank) const override { return table_.at(static_cast<std::uint32_t>(rank)); }

 private:
  bool isChild(int peer) const { return index(peer) < children_.size(); }
  std::size_t index(int peer) const {
    for (std::size_t i = 0; i < children_.size(); ++i)
      if (children_[i] == peer) return i;
    return children_.size();
  }

  void onRegister(int peer, const wire::Register& r) {
    if (done_ || !add(peer, r) || !everyoneRegistered()) return;
    table_ = table();
    haveTable_ = true;
    for (int c : children_) host_.send(c, wire::Kind::Table, table_.encoded());
    released_.assign(static_cast<std::size_t>(cfg_.nranks), 1);
    released_[0] = 0;
    for (int c : children_) released_[c] = 0;
    for (int p = 1; p < cfg_.nranks; ++p)
      if (released_[p] && !host_.release(p))
        released_[p] = 0;  // not idle: left to the link budget
      else
        releasing_ += released_[p];
    forgetRegistrations();
    if (releasing_ == 0) complete();
  }

  void onTable(int peer, wire::AddressTable table) {
    if (cfg_.rank == 0 || peer != parent_ || done_ || haveTable_) {
      log::warn(cfg_.rank, "ignored an unexpected address table from rank {}", peer);
      return;
    }
    table_ = std::move(table);
    haveTable_ = true;
    childUp_.assign(children_.size(), 0);
    for (int c : children_) {
      host_.connect(c, table_.at(static_cast<std::uint32_t>(c)));
      host_.send(c, wire::Kind::Table, table_.encoded());  // the same bytes, sent once the link is up
    }
    maybeComplete();
  }

  void maybeComplete() {
    if (!done_ && haveTable_ && childrenUp_ == static_cast<int>(children_.size())) complete();
  }

  void complete() { Registration::complete(fmt::format(" (tree, radix {})", radix_)); }

  const int radix_;
  const int parent_;
  const std::vector<int> children_;
  wire::AddressTable table_;
  bool haveTable_ = false;
  std::vector<char> childUp_;
  std::vector<char> released_;  // the root's: released links not closed yet
  int releasing_ = 0;
  int childrenUp_ = 0;
  bool connectedToRoot_ = false;
};

}  // namespace

std::unique_ptr<Rendezvous> makeTree(Host& host, const Config& config, int radix) {
  return std::make_unique<Tree>(host, config, radix);
}

}  // namespace tether::rdv
