// The entry of a host-local group (host_group.hpp): which group this rank
// tries and which part it plays there. It binds the group's socket and leads
// (host_group_leader.hpp), or joins the process that holds it
// (host_group_member.hpp); a member turned away (the group is full, or did
// not answer yet) comes back here for the next group or another try.
#include "rendezvous/host_group.hpp"

#include <fmt/format.h>

#include <boost/asio/post.hpp>

#include "rendezvous/host_group_leader.hpp"
#include "rendezvous/host_group_member.hpp"
#include "rendezvous/host_group_shape.hpp"

namespace tether::rdv {
namespace host {
namespace {

class Entry final : public HostGroup, public std::enable_shared_from_this<Entry> {
 public:
  Entry(asio::io_context& io, HostGroupOptions o, HostGroupEvents e, const PeerAddress& self)
      : io_(io), opts_(std::move(o)), events_(std::move(e)), self_(self) {}

  // Binds the next group's socket (then leads it) or joins its holder.
  void begin();

  bool leader() const override { return leader_ != nullptr; }
  int leaderRank() const override { return member_ ? member_->leaderRank() : -1; }
  int group() const override { return group_; }
  std::vector<int> ranks() const override { return leader_ ? leader_->ranks() : std::vector<int>{}; }

  void sendTable(wire::SharedBytes table) override {
    if (leader_) leader_->sendTable(std::move(table));
  }

  void abandon(ErrorCode code, const std::string& reason, int peer) override {
    if (closed_ || abandoned_) return;
    abandoned_ = true;
    if (leader_) return leader_->abandon(code, reason, peer);
    if (member_) member_->abandon(code, reason, peer);
  }

  void close() override {
    if (closed_) return;
    closed_ = true;
    if (leader_) leader_->close();
    if (member_) member_->close();
  }

  std::string describe() const override {
    if (leader_) return leader_->describe();
    if (member_) return member_->describe();
    return Member::describe(group_, -1, name_);
  }

 private:
  void failed(ErrorCode code, std::string what, int peer) {
    if (closed_ || abandoned_) return;
    if (events_.failed) events_.failed(code, std::move(what), peer);
  }

  // A member found its group full: the next one.
  void nextGroup();

  asio::io_context& io_;
  const HostGroupOptions opts_;
  const HostGroupEvents events_;
  const PeerAddress self_;
  std::shared_ptr<Leader> leader_;  // once it bound a group's socket
  std::shared_ptr<Member> member_;  // the member it is (or was, before it led)
  bool abandoned_ = false, closed_ = false;
  int attempts_ = 0;  // retries of a group that did not answer yet
  int probe_ = 0;     // groups found full so far
  int group_ = 0;     // the group this rank leads or tries
  std::string name_;  // its socket
};

void Entry::begin() {
  if (closed_) return;
  if (member_) attempts_ = member_->attempts();
  group_ = groupAt(opts_, probe_);
  name_ = groupSocketName(opts_.socket, group_);
  boost::system::error_code ec;
  auto listener = link::UnixListener::open(io_, name_, ec);
  if (listener) {
    leader_ = std::make_shared<Leader>(io_, opts_, events_, self_, group_, name_, std::move(listener), abandoned_);
    return leader_->start();
  }
  if (ec != asio::error::address_in_use)
    return failed(ErrorCode::System,
                  fmt::format("rendezvous: cannot bind the host-local socket {}: {}", name_, ec.message()), -1);
  Member::Next next;
  next.full = [w = weak_from_this()] {
    if (auto self = w.lock()) self->nextGroup();
  };
  next.again = [w = weak_from_this()] {
    if (auto self = w.lock()) self->begin();
  };
  member_ = std::make_shared<Member>(io_, opts_, events_, self_, group_, name_, attempts_, abandoned_, std::move(next));
  member_->start();
}

void Entry::nextGroup() {
  ++probe_;
  if (probe_ > opts_.nranks)  // more groups than ranks: something else holds the names
    return failed(ErrorCode::System, fmt::format("rendezvous: every host-local group up to {} answered full", name_),
                  -1);
  begin();
}

}  // namespace
}  // namespace host

std::shared_ptr<HostGroup> HostGroup::start(asio::io_context& io, HostGroupOptions options, HostGroupEvents events,
                                            const PeerAddress& self) {
  auto g = std::make_shared<host::Entry>(io, std::move(options), std::move(events), self);
  // Begins from the loop: its first events come after start() has returned.
  asio::post(io, [w = std::weak_ptr<host::Entry>(g)] {
    if (auto self = w.lock()) self->begin();
  });
  return g;
}

}  // namespace tether::rdv
