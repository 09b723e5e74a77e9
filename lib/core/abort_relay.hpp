// The abort relay: the abort protocol over this world's links — who gets the
// notice when this rank aborts or hears of an abort (every open link, then
// the AbortChannel's spanning tree), re-routing around a tree target that is
// lost, and which failed collectives start an abort. Progress thread only.
#pragma once

#include <exception>
#include <optional>
#include <vector>

#include "base/layer.hpp"
#include "core/abort_channel.hpp"
#include "wire/notice.hpp"

TETHER_LAYER(6, "core");

namespace tether {

// The links as the abort relay sees them (the world implements it).
class NoticeLinks {
 public:
  // The peers whose current link is open and has not said goodbye.
  virtual std::vector<int> openPeers() const = 0;
  // Queues `payload` as an Abort frame on the current link to `peer`, if it
  // is still open (no dial).
  virtual void sendOpen(int peer, const std::vector<unsigned char>& payload) = 0;
  // To `peer` down the tree, dialling if needed.
  virtual void sendDialling(int peer, const std::vector<unsigned char>& payload) = 0;
  // `peer` is gone or leaving: the tree routes around it.
  virtual bool departed(int peer) const = 0;

 protected:
  ~NoticeLinks() = default;
};

class AbortRelay {
 public:
  AbortRelay(int rank, int nranks, AbortChannel& channel, NoticeLinks& links)
      : rank_(rank), nranks_(nranks), channel_(channel), links_(links) {}

  // Handles notice `n` (from rank `from`, -1: decided here): true the first
  // time only; then, with `notifyPeers`, it has been sent on — over every
  // open link and, once `joined` (the table is known), down the tree.
  bool handle(const wire::AbortNotice& n, bool notifyPeers, int from, bool joined);
  // The link to `peer` closed and `peer` is gone: if the notice went to it
  // down the tree, its children get it from here.
  void peerGone(int peer);
  // Dead, gone or named lost by the notice: the tree routes around it.
  bool unavailable(int peer) const;
  // A world collective that failed here with `e` leaves every other rank
  // waiting for steps this rank will never send: the notice to start (origin:
  // this rank, reason: the error), for a lost peer, a protocol error or a
  // timeout; none otherwise, or if an abort was handled already.
  std::optional<wire::AbortNotice> afterFailedCollective(std::exception_ptr e) const;

 private:
  void send(int from, bool joined);

  const int rank_, nranks_;
  AbortChannel& channel_;
  NoticeLinks& links_;
};

}  // namespace tether
