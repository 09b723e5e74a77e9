// rdma/tampering_bootstrap.hpp — a Bootstrap that forwards everything to
// another one but lets a test damage what alltoall delivers, to reproduce the
// symptom of the swapped/zeroed-payload bug class on top of a correct bootstrap.
#pragma once

#include <functional>
#include <memory>

#include "tether/forwarding_bootstrap.hpp"

namespace tether::test {

class TamperingBootstrap : public ForwardingBootstrap {
 public:
  // `tamper(recvData, bytesPerRank)` runs on what alltoall received, before the caller sees it.
  TamperingBootstrap(Bootstrap& inner, std::function<void(unsigned char*, std::size_t)> tamper)
      : ForwardingBootstrap(inner), tamper_(std::move(tamper)) {}

  void alltoall(const void* s, void* r, std::size_t b) override {
    inner().alltoall(s, r, b);
    tamper_(static_cast<unsigned char*>(r), b);
  }

 private:
  std::function<void(unsigned char*, std::size_t)> tamper_;
};

}  // namespace tether::test
