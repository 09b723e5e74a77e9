// A host-local group's leader (host_group.hpp): the rank that bound the
// group's socket admits members over the handshake's proofs (a full group
// answers Full first), hands their registrations to its rendezvous in
// batches, and sends them the table or the cause it failed for
// (host_group_leader.cpp). Made by the entry (host_group.cpp) once the bind
// succeeded. Internal to the rendezvous layer; progress thread only.
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

class Leader final : public std::enable_shared_from_this<Leader> {
 public:
  // `listener`: group `group`'s socket `name`, bound. `abandoned`: the rank
  // gave up before it came to lead (it holds the name, admits no one).
  Leader(asio::io_context& io, HostGroupOptions o, HostGroupEvents e, const PeerAddress& self, int group,
         std::string name, std::shared_ptr<link::UnixListener> listener, bool abandoned);

  // Counts itself, accepts, says `leading`, and flushes what is complete.
  void start();

  std::vector<int> ranks() const { return ranks_; }
  // Sends the table to every member; they close once they have it.
  void sendTable(wire::SharedBytes table);
  // Tells every member (and every rank still queued at the socket) why the
  // rendezvous failed, then closes.
  void abandon(ErrorCode code, const std::string& reason, int peer);
  void close();
  std::string describe() const;

 private:
  void failed(ErrorCode code, std::string what, int peer) {
    if (closed_ || abandoned_) return;
    if (events_.failed) events_.failed(code, std::move(what), peer);
  }

  int counted() const { return static_cast<int>(ranks_.size()) + (rootHere_ ? 1 : 0); }
  // Counted, and welcomed but not registered yet: a full group answers Full.
  int admitted() const { return counted() + welcomed_; }

  // A group's batch goes when it has its expected ranks; unknown host size:
  // also once no rank arrived for `quiet` (then one per later batch).
  // A group that sent a rank on and then lost a place (a stranger refused,
  // a rank gone before it registered) flushes what it has, and each later rank.
  void checkFlush();

  void flush();

  static asio::awaitable<void> writeOne(std::shared_ptr<Leader> self, std::shared_ptr<link::Stream> s, Msg type,
                                        wire::SharedBytes payload);

  // A full group (its places taken: ranks counted, welcomed or in their
  // handshake) answers Full here, one connection at a time, so a leader
  // holds at most its group's places, the listener and the one it answers.
  static asio::awaitable<void> acceptLoop(std::shared_ptr<Leader> self);

  // A place in the group, held from the accept (handshaking) or the welcome
  // (welcomed) until the rank registers or is lost.
  struct Place {
    Leader& g;
    int* count;
    Place(Leader& leader, int& n) : g(leader), count(&n) {}
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

  // A rank in its handshake (accepted, not registered yet), listed while
  // serve() greets it: abandon() writes it the Fail too, after what it was
  // sent, unless a message to it is half written (then it closes, and the
  // rank reads a lost leader).
  struct Greeting {
    Leader& g;
    std::shared_ptr<link::Stream> s;
    bool writing = false;
    Greeting(Leader& leader, std::shared_ptr<link::Stream> stream) : g(leader), s(std::move(stream)) {
      g.greeting_.push_back(this);
    }
    Greeting(const Greeting&) = delete;
    Greeting& operator=(const Greeting&) = delete;
    ~Greeting() { end(); }
    void end() { std::erase(g.greeting_, this); }
    // All of it now (a small message into a fresh socket), so abandon()
    // knows the rank has it whole; else the rest when the socket drains.
    asio::awaitable<void> write(Msg type, const Bytes& payload) {
      const std::size_t n = writeNow(*s, type, payload);
      if (n == 5 + payload.size()) co_return;
      writing = true;
      co_await writeMsg(*s, type, payload, n);
      writing = false;
    }
  };

  // The leader's side of one member: handshake, registration, then wait for
  // its close (after the table) or its loss.
  static asio::awaitable<void> serve(std::shared_ptr<Leader> self, std::shared_ptr<link::Stream> s);

  asio::io_context& io_;
  const HostGroupOptions opts_;
  const HostGroupEvents events_;
  const PeerAddress self_;
  const int group_, cap_;   // the group it leads, and its size at most
  const std::string name_;  // its socket
  asio::steady_timer quiet_;
  std::shared_ptr<link::UnixListener> listener_;
  std::map<int, std::shared_ptr<link::Stream>> members_;
  std::vector<Greeting*> greeting_;  // the ranks in their handshake
  std::vector<int> ranks_;  // itself, then members as they came
  std::vector<wire::Register> pending_;
  wire::SharedBytes fail_;  // its Fail message, once it abandoned
  bool rootHere_ = false, tableSent_ = false, abandoned_ = false, closed_ = false;
  int handshaking_ = 0, welcomed_ = 0;  // places: accepted, not welcomed; welcomed, not registered
  bool sentOn_ = false;                 // it answered Full
};

}  // namespace tether::rdv::host
