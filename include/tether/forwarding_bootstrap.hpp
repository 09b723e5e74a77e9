// tether/forwarding_bootstrap.hpp — a Bootstrap that forwards every call to
// another one. Derive from it to wrap a bootstrap and change only the calls
// you care about (tracing, fault injection in tests, accounting).
// Header-only, C++17.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "tether/bootstrap.hpp"

namespace tether {

class ForwardingBootstrap : public Bootstrap {
 public:
  // `inner` must outlive this object.
  explicit ForwardingBootstrap(Bootstrap& inner) : inner_(inner) {}

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  int worldRank() const override { return inner_.worldRank(); }
  int nranksPerNode() const override { return inner_.nranksPerNode(); }
  int localRank() const override { return inner_.localRank(); }
  int nodeId() const override { return inner_.nodeId(); }
  int nnodes() const override { return inner_.nnodes(); }
  std::string peerHost(int peer) const override { return inner_.peerHost(peer); }
  std::string peerAddress(int peer) const override { return inner_.peerAddress(peer); }
  void send(const void* data, std::size_t bytes, int peer, int tag) override { inner_.send(data, bytes, peer, tag); }
  void recv(void* data, std::size_t bytes, int peer, int tag) override { inner_.recv(data, bytes, peer, tag); }
  void allgather(void* allData, std::size_t bytesPerRank) override { inner_.allgather(allData, bytesPerRank); }
  void alltoall(const void* sendData, void* recvData, std::size_t bytesPerRank) override {
    inner_.alltoall(sendData, recvData, bytesPerRank);
  }
  void alltoallv(const void* sendData, const std::size_t* sendCounts, const std::size_t* sendDispls, void* recvData,
                 const std::size_t* recvCounts, const std::size_t* recvDispls) override {
    inner_.alltoallv(sendData, sendCounts, sendDispls, recvData, recvCounts, recvDispls);
  }
  void broadcast(void* data, std::size_t bytes, int root) override { inner_.broadcast(data, bytes, root); }
  void barrier() override { inner_.barrier(); }
  void barrier(const std::vector<int>& ranks) override { inner_.barrier(ranks); }
  std::shared_ptr<Bootstrap> split(int color, int key) override { return inner_.split(color, key); }
  std::shared_ptr<Bootstrap> splitByNode() override { return inner_.splitByNode(); }
  Request iallgather(void* allData, std::size_t bytesPerRank) override {
    return inner_.iallgather(allData, bytesPerRank);
  }
  Request ialltoall(const void* sendData, void* recvData, std::size_t bytesPerRank) override {
    return inner_.ialltoall(sendData, recvData, bytesPerRank);
  }
  Request ibarrier() override { return inner_.ibarrier(); }
  Request isend(const void* data, std::size_t bytes, int peer, int tag) override {
    return inner_.isend(data, bytes, peer, tag);
  }
  Request irecv(void* data, std::size_t bytes, int peer, int tag) override {
    return inner_.irecv(data, bytes, peer, tag);
  }
  void abort(const std::string& reason) override { inner_.abort(reason); }
  void setTimeout(std::chrono::milliseconds timeout) override { inner_.setTimeout(timeout); }
  std::chrono::milliseconds timeout() const override { return inner_.timeout(); }

 protected:
  Bootstrap& inner() const { return inner_; }

 private:
  Bootstrap& inner_;
};

}  // namespace tether
