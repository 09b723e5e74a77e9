// A host-local group's member (host_group.hpp): the rank that found group
// `group`'s socket held proves the secret both ways, registers with the
// holder, and waits for the table or the leader's cause; a member that gives
// up first says why (host_group_member.cpp). A full group, or one that did
// not answer yet, goes back to the entry (host_group.cpp), which tries the
// next group or this one again. Internal to the rendezvous layer; progress
// thread only.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <string>

#include "base/layer.hpp"
#include "link/unix_stream.hpp"
#include "rendezvous/host_group.hpp"
#include "rendezvous/host_message.hpp"

TETHER_LAYER(4, "rendezvous");

namespace tether::rdv::host {

class Member final : public std::enable_shared_from_this<Member> {
 public:
  // Where a member goes when this group does not take it: `full`, the group
  // answered Full (its stream is closed); `again`, its holder did not answer
  // yet (after a pause). Not called once closed.
  struct Next {
    std::function<void()> full, again;
  };
  // `attempts`: the retries of groups that did not answer so far (bounded
  // over all groups). `abandoned`: the rank gave up before it came here.
  Member(asio::io_context& io, HostGroupOptions o, HostGroupEvents e, const PeerAddress& self, int group,
         std::string name, int attempts, bool abandoned, Next next)
      : io_(io),
        opts_(std::move(o)),
        events_(std::move(e)),
        self_(self),
        group_(group),
        name_(std::move(name)),
        next_(std::move(next)),
        attempts_(attempts),
        abandoned_(abandoned) {}

  // Dials the group's socket and joins its holder.
  void start();

  // The leader's rank once it answered, else -1.
  int leaderRank() const { return leaderRank_; }
  int attempts() const { return attempts_; }
  // Registered and waiting for the table: tells the leader why it leaves
  // (Leave), then closes, so the leader does not report it lost.
  void abandon(ErrorCode code, const std::string& reason, int peer);
  void close();
  std::string describe() const { return describe(group_, leaderRank_, name_); }
  // Where a member of `group` at `name` stands (leaderRank -1: not answered).
  static std::string describe(int group, int leaderRank, const std::string& name);

 private:
  void failed(ErrorCode code, std::string what, int peer) {
    if (closed_ || abandoned_) return;
    if (events_.failed) events_.failed(code, std::move(what), peer);
  }

  // Before the leader answered: worth another try (bounded).
  bool retryable(const boost::system::error_code& ec);
  // This group again after a pause (its leader was between bind and listen,
  // or closed the connection before it answered: then the name is free or
  // soon answers).
  static asio::awaitable<void> again(std::shared_ptr<Member> self);

  // Writes one message; false if the leader is gone (the next read says why).
  static asio::awaitable<bool> writeTold(link::Stream& s, Msg type, const Bytes& payload);
  // The leader's Fail: its cause, naming the peer it names (leaderRank -1:
  // it failed before it answered this rank).
  void leaderFailed(const Bytes& fail, int leaderRank);

  // Handshake, registration, the table.
  static asio::awaitable<void> join(std::shared_ptr<Member> self);

  asio::io_context& io_;
  const HostGroupOptions opts_;
  const HostGroupEvents events_;
  const PeerAddress self_;
  const int group_;
  const std::string name_;  // the group's socket
  const Next next_;
  std::shared_ptr<link::Stream> stream_;  // to the leader
  int attempts_;
  int leaderRank_ = -1;
  bool abandoned_, closed_ = false;
  bool awaitingTable_ = false;  // registered, neither the table nor a Fail read yet
};

}  // namespace tether::rdv::host
