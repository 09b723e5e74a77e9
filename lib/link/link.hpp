// One long-lived, ordered TCP stream to one peer. A single outstanding write
// drains a queue of frames (gathered into one writev); a read loop parses
// frames from a read-ahead buffer and lands payloads straight in the posted
// receive's buffer when there is one. Progress thread only.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "wire/frame.hpp"

namespace tether {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
class World;
class Op;

struct OutFrame {
  wire::HeaderBytes header{};
  std::vector<unsigned char> owned;  // copied payload, or
  const void* ref = nullptr;         // the caller's payload (op waits until written)
  std::size_t len = 0;
  Op* op = nullptr;                  // set only for referenced payloads
  bool abandoned = false;            // op failed while this frame was being written
};

class Link : public std::enable_shared_from_this<Link> {
 public:
  enum class State { Dialing, Up, Closed };

  Link(World& world, int peer);
  int peer() const { return peer_; }
  State state() const { return state_; }
  const std::string& remote() const { return remote_; }
  bool goodbyeReceived() const { return goodbye_; }
  void markGoodbye() { goodbye_ = true; }
  void markGoodbyeAcked() { goodbyeAcked_ = true; }
  bool goodbyeAcked() const { return goodbyeAcked_; }
  // Nothing queued or being written.
  bool idle() const { return queue_.empty() && inFlight_ == 0; }

  // Dialing -> Up: starts the read loop and flushes frames queued meanwhile.
  void attach(tcp::socket socket, bool dialedByUs);
  bool dialedByUs() const { return dialedByUs_; }
  void enqueue(OutFrame frame);
  // Drop the op's frames and receive target. A frame already being written
  // from (or read into) the op's buffer is finished first; the op is held
  // (Op::draining) until then.
  void abandon(Op* op);
  // Closes the link and reports it down to the world once.
  void fail(const std::string& reason);
  // Ops with referenced frames still queued (they cannot complete any more).
  std::vector<Op*> opsWithQueuedFrames() const;

 private:
  asio::awaitable<void> readLoop();
  asio::awaitable<void> fill(std::size_t n);
  asio::awaitable<void> readPayload(std::size_t len);
  void startWrite();
  void finishWrite();

  World& world_;
  const int peer_;
  State state_ = State::Dialing;
  std::string remote_;
  std::unique_ptr<tcp::socket> socket_;
  bool goodbye_ = false;
  bool goodbyeAcked_ = false;
  bool dialedByUs_ = false;

  // Writing.
  std::deque<OutFrame> queue_;
  std::size_t inFlight_ = 0;  // frames at the front of queue_ being written now

  // Reading.
  std::vector<unsigned char> rbuf_;
  std::size_t rbegin_ = 0, rend_ = 0;
  const Op* pendingOp_ = nullptr;      // op whose payload is arriving now
  unsigned char* pendingDst_ = nullptr; // where it goes (nullptr: discard)
  bool directRead_ = false;            // the socket is reading into pendingDst_
  bool mayHaveData_ = true;            // the last read did not empty the socket
  Op* drainingRead_ = nullptr;         // abandoned op whose direct read is still running
};

}  // namespace tether
