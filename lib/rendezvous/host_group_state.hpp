// The state of one rank's part in a host-local group (host_group.hpp): the
// leader's side (bind, accept, serve each member, send the table or the
// failure: host_group.cpp) and the member's side (find a group that has
// room, the handshake, register, wait for the table: host_group_member.cpp)
// share it. Internal to the rendezvous layer; progress thread only.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/layer.hpp"
#include "link/unix_stream.hpp"
#include "rendezvous/host_group.hpp"
#include "rendezvous/host_message.hpp"

TETHER_LAYER(4, "rendezvous");

namespace tether::rdv::host {

class Group final : public HostGroup, public std::enable_shared_from_this<Group> {
 public:
  Group(asio::io_context& io, HostGroupOptions o, HostGroupEvents e, const PeerAddress& self)
      : io_(io), opts_(std::move(o)), events_(std::move(e)), self_(self), quiet_(io) {}

  // Binds the next group's socket (then leads it) or joins its holder.
  void begin();

  bool leader() const override { return leader_; }
  int leaderRank() const override { return leaderRank_; }
  int group() const override { return group_; }
  std::vector<int> ranks() const override { return ranks_; }

  void sendTable(wire::SharedBytes table) override;

  void abandon(ErrorCode code, const std::string& reason, int peer) override;

  void close() override;

  std::string describe() const override;

 private:
  void failed(ErrorCode code, std::string what, int peer) {
    if (closed_ || abandoned_) return;
    if (events_.failed) events_.failed(code, std::move(what), peer);
  }

  // A member registered with its leader and still waiting for the table ends
  // its rendezvous for a cause of its own: the leader reads why (Leave), then
  // EOF. Written now, as the leader's Fail is (one small message fits an
  // empty socket buffer; part of it reads as a lost member, as a close does).
  void leave(ErrorCode code, const std::string& reason, int peer);

  int counted() const { return static_cast<int>(ranks_.size()) + (rootHere_ ? 1 : 0); }
  // Counted, and welcomed but not registered yet: a full group answers Full.
  int admitted() const { return counted() + welcomed_; }

  // With a known host size L, groups 0..G-1 (G = ceil(L / groupMax)) hold L
  // ranks: group j min(groupMax, L - j * groupMax). A rank tries them from
  // its own ((rank mod L) / groupMax: one try each when a host's ranks are
  // numbered in a block), cyclically, then groups G, G+1, ... (more ranks than
  // L came). Unknown L: groups 0, 1, 2, ... of groupMax each.
  int groups() const { return opts_.localRanks > 0 ? (opts_.localRanks + opts_.groupMax - 1) / opts_.groupMax : 0; }
  int groupAt(int probe) const {
    const int g = groups();
    if (probe >= g) return probe;
    const int first = (opts_.rank % opts_.localRanks) / opts_.groupMax;
    return (first + probe) % g;
  }
  int capOf(int group) const {
    return group < groups() ? std::min(opts_.groupMax, opts_.localRanks - group * opts_.groupMax) : opts_.groupMax;
  }
  // How many ranks make a batch: all of a known group; past a known host's
  // groups, each rank (the count was too small); unknown L: a full group.
  int expectedOf(int group) const {
    if (opts_.localRanks > 0) return group < groups() ? capOf(group) : 1;
    return opts_.groupMax;
  }

  // A group's batch goes when it has its expected ranks; unknown host size:
  // also once no rank arrived for `quiet` (then one per later batch).
  // A group that sent a rank on and then lost a place (a stranger refused,
  // a rank gone before it registered) flushes what it has, and each later rank.
  void checkFlush();

  void flush();

  static asio::awaitable<void> writeOne(std::shared_ptr<Group> self, std::shared_ptr<link::Stream> s, Msg type,
                                        wire::SharedBytes payload);

  // A full group (its places taken: ranks counted, welcomed or in their
  // handshake) answers Full here, one connection at a time, so a leader
  // holds at most its group's places, the listener and the one it answers.
  static asio::awaitable<void> acceptLoop(std::shared_ptr<Group> self);

  // A place in the group, held from the accept (handshaking) or the welcome
  // (welcomed) until the rank registers or is lost.
  struct Place {
    Group& g;
    int* count;
    Place(Group& group, int& n) : g(group), count(&n) {}
    void move(int& to) {
      --*count;
      count = &to;
      ++*count;
    }
    void release() {
      if (count) --*count, count = nullptr;
    }
    ~Place() {
      if (!count) return;
      release();
      if (!g.closed_ && !g.abandoned_) g.checkFlush();  // lost before it registered
    }
  };

  // The leader's side of one member: handshake, registration, then wait for
  // its close (after the table) or its loss.
  static asio::awaitable<void> serve(std::shared_ptr<Group> self, std::shared_ptr<link::Stream> s);

  // A member: tries the next group (this one is full), or this one again
  // after a pause (its leader was between bind and listen, or closed the
  // connection before it answered: then the name is free or soon answers).
  void nextGroup();
  static asio::awaitable<void> again(std::shared_ptr<Group> self);
  // Before the leader answered: worth another try (bounded).
  bool retryable(const boost::system::error_code& ec);

  // A member's side: handshake, registration, the table.
  static asio::awaitable<void> join(std::shared_ptr<Group> self);

  asio::io_context& io_;
  const HostGroupOptions opts_;
  const HostGroupEvents events_;
  const PeerAddress self_;
  asio::steady_timer quiet_;
  std::shared_ptr<link::UnixListener> listener_;
  std::shared_ptr<link::Stream> stream_;                  // a member's, to the leader
  std::map<int, std::shared_ptr<link::Stream>> members_;  // the leader's
  std::vector<int> ranks_;                                // the leader's: itself, then members as they came
  std::vector<wire::Register> pending_;
  wire::SharedBytes fail_;  // the leader's Fail message, once it abandoned
  bool leader_ = false, rootHere_ = false, tableSent_ = false, abandoned_ = false, closed_ = false;
  bool awaitingTable_ = false;  // a member's: registered, neither the table nor a Fail read yet
  int leaderRank_ = -1;
  int attempts_ = 0;                    // retries of a group that did not answer yet
  int probe_ = 0;                       // groups found full so far
  int group_ = 0, cap_ = 0;             // the group this rank leads or tries, and its size at most
  int handshaking_ = 0, welcomed_ = 0;  // the leader's places: accepted, not welcomed; welcomed, not registered
  bool sentOn_ = false;                 // the leader's: it answered Full
  std::string name_;                    // its socket
};

}  // namespace tether::rdv::host
