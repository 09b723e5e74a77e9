// tether/adapters/mscclpp.hpp — a runtime's abstract bootstrap, implemented by tether.
//
// Header-only, C++17. tether::adapters::BootstrapFor<Base> derives from a
// runtime's bootstrap base class and forwards every call to a tether::Bootstrap
// (a TcpBootstrap, a split() child, or an InProcessWorld rank in unit tests).
// For MSCCL++ the base is mscclpp::Bootstrap, whose pure virtual functions are
//
//   int getRank() const;  int getNranks() const;  int getNranksPerNode() const;
//   void send(void* data, int size, int peer, int tag);
//   void recv(void* data, int size, int peer, int tag);
//   void allGather(void* allData, int size);   // in place
//   void barrier();
//
// and whose virtual getNranksPerIpcDomain() keeps the base's default. Plugging
// it into MSCCL++ (docs/integration.md):
//
//   #include <mscclpp/core.hpp>
//   #include <tether/adapters/mscclpp.hpp>
//   #include <tether/tcp_bootstrap.hpp>
//
//   std::shared_ptr<tether::Bootstrap> tcp = tether::TcpBootstrap::fromEnvironment();
//   auto bootstrap = std::make_shared<tether::adapters::BootstrapFor<mscclpp::Bootstrap>>(tcp);
//   mscclpp::Communicator comm(bootstrap);
//
// Errors: sizes must be non-negative (tether::Error{InvalidArgument} otherwise);
// every other failure is the tether::Error the wrapped bootstrap throws, with
// its code and a message naming rank, peer and operation.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include "tether/bootstrap.hpp"
#include "tether/error.hpp"

namespace tether {
namespace adapters {

template <class Base>
class BootstrapFor : public Base {
 public:
  // `bootstrap` must not be null; the adapter shares its ownership.
  explicit BootstrapFor(std::shared_ptr<tether::Bootstrap> bootstrap) : bootstrap_(std::move(bootstrap)) {
    if (!bootstrap_) throw Error(ErrorCode::InvalidArgument, "BootstrapFor: the tether bootstrap is null");
  }

  // The base's other send/recv overloads (MSCCL++'s std::vector<char> ones)
  // stay visible next to the overrides.
  using Base::recv;
  using Base::send;

  int getRank() const override { return bootstrap_->rank(); }
  int getNranks() const override { return bootstrap_->size(); }
  int getNranksPerNode() const override { return bootstrap_->nranksPerNode(); }

  void send(void* data, int size, int peer, int tag) override {
    bootstrap_->send(data, bytes(size, "send"), peer, tag);
  }
  void recv(void* data, int size, int peer, int tag) override {
    bootstrap_->recv(data, bytes(size, "recv"), peer, tag);
  }
  void allGather(void* allData, int size) override { bootstrap_->allgather(allData, bytes(size, "allGather")); }
  void barrier() override { bootstrap_->barrier(); }

  // The tether bootstrap underneath (for split(), abort(), setTimeout(), ...).
  tether::Bootstrap& underlying() const { return *bootstrap_; }

 private:
  std::size_t bytes(int size, const char* op) const {
    if (size < 0) {
      throw Error(ErrorCode::InvalidArgument,
                  "rank " + std::to_string(bootstrap_->rank()) + ": " + op + ": negative size " + std::to_string(size),
                  bootstrap_->rank());
    }
    return static_cast<std::size_t>(size);
  }

  std::shared_ptr<tether::Bootstrap> bootstrap_;
};

}  // namespace adapters
}  // namespace tether
