// naive_transport.hpp — CONTROL ONLY, deliberately broken. Never link into the
// library (it lives under test/ and only test/control/meson.build builds it).
//
// The design of the bootstraps that swapped payloads: every message is its own
// short-lived TCP connection (connect, write, close); the receiver accept()s
// connections and matches them by (peer, tag) alone, parking the ones it did not
// ask for yet; collectives restart their tags at 0 on every call. Whenever the
// receiver's accept order differs from the sender's connect order, two
// messages with the same (peer, tag) — an alltoall block and a later barrier
// token — trade places, silently.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <list>
#include <string>
#include <vector>

namespace tether::control {

class NaiveRank {
 public:
  using Clock = std::chrono::steady_clock;

  // Listens on 127.0.0.1 at a free port.
  NaiveRank(int rank, int nranks, std::chrono::milliseconds timeout);
  ~NaiveRank();
  NaiveRank(const NaiveRank&) = delete;
  NaiveRank& operator=(const NaiveRank&) = delete;

  int rank() const { return rank_; }
  int size() const { return nranks_; }
  std::uint16_t listenPort() const { return port_; }
  // "host:port" of every rank's (advertised) listener, index = rank.
  void setPeers(std::vector<std::string> addresses);

  // One connection per message. Returns once the bytes are written and closed.
  void send(int peer, int tag, const void* data, std::size_t bytes);
  // First parked message with this (peer, tag), else accepts until one comes.
  // Throws std::runtime_error on timeout or when the sizes differ.
  void recv(int peer, int tag, void* data, std::size_t bytes);

  // Step s = 1..n-1 sends block (r+s)%n with tag s-1, then receives from
  // (r-s)%n with tag s-1: the tag counter restarts at every call.
  void alltoall(const void* sendData, void* recvData, std::size_t bytesPerRank);
  // Dissemination barrier; round k sends a token to (r+2^k)%n with tag k and
  // receives one from (r-2^k)%n. `tokenFor(k, peer)` fills the sent token,
  // `received(k, peer, token)` sees each received one.
  template <class Fill, class Seen>
  void barrier(std::size_t tokenBytes, Fill tokenFor, Seen received) {
    std::vector<unsigned char> out(tokenBytes), in(tokenBytes);
    for (int k = 0, dist = 1; dist < nranks_; ++k, dist *= 2) {
      int to = (rank_ + dist) % nranks_;
      int from = (rank_ - dist + nranks_) % nranks_;
      tokenFor(k, to, out.data());
      send(to, k, out.data(), out.size());
      recv(from, k, in.data(), in.size());
      received(k, from, in.data());
    }
  }

 private:
  struct Message {
    int peer;
    int tag;
    std::vector<unsigned char> data;
  };
  Message acceptOne(Clock::time_point deadline);

  int rank_;
  int nranks_;
  std::chrono::milliseconds timeout_;
  int listener_ = -1;
  std::uint16_t port_ = 0;
  std::vector<std::string> peers_;
  std::list<Message> parked_;
};

}  // namespace tether::control
