// rdma/tampering_bootstrap.hpp — a Bootstrap that forwards everything to
// another one but lets a test damage what alltoall delivers, to reproduce the
// symptom of the swapped/zeroed-payload bug class on top of a correct bootstrap.
#pragma once

#include <functional>
#include <memory>

#include "tether/bootstrap.hpp"

namespace tether::test {

class TamperingBootstrap : public Bootstrap {
 public:
  // `tamper(recvData, bytesPerRank)` runs on what alltoall received, before the caller sees it.
  TamperingBootstrap(Bootstrap& inner, std::function<void(unsigned char*, std::size_t)> tamper)
      : inner_(inner), tamper_(std::move(tamper)) {}

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  int nranksPerNode() const override { return inner_.nranksPerNode(); }
  void send(const void* d, std::size_t b, int p, int t) override { inner_.send(d, b, p, t); }
  void recv(void* d, std::size_t b, int p, int t) override { inner_.recv(d, b, p, t); }
  void allgather(void* d, std::size_t b) override { inner_.allgather(d, b); }
  void alltoall(const void* s, void* r, std::size_t b) override {
    inner_.alltoall(s, r, b);
    tamper_(static_cast<unsigned char*>(r), b);
  }
  void alltoallv(const void* s, const std::size_t* sc, const std::size_t* sd, void* r,
                 const std::size_t* rc, const std::size_t* rd) override {
    inner_.alltoallv(s, sc, sd, r, rc, rd);
  }
  void broadcast(void* d, std::size_t b, int root) override { inner_.broadcast(d, b, root); }
  void barrier() override { inner_.barrier(); }
  void barrier(const std::vector<int>& ranks) override { inner_.barrier(ranks); }
  std::shared_ptr<Bootstrap> split(int color, int key) override { return inner_.split(color, key); }
  void abort(const std::string& reason) override { inner_.abort(reason); }
  void setTimeout(std::chrono::milliseconds t) override { inner_.setTimeout(t); }
  std::chrono::milliseconds timeout() const override { return inner_.timeout(); }

 private:
  Bootstrap& inner_;
  std::function<void(unsigned char*, std::size_t)> tamper_;
};

}  // namespace tether::test
