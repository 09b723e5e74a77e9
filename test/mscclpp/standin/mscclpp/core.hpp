// mscclpp/core.hpp stand-in — the two MSCCL++ classes the adapter meets, with
// MSCCL++'s signatures (not its code): the abstract mscclpp::Bootstrap and a
// Communicator that takes one. Lets the tests compile the adapter and the
// docs/integration.md snippet as MSCCL++ users do, without MSCCL++ installed.
#pragma once

#include <mscclpp/errors.hpp>

#include <memory>
#include <utility>
#include <vector>

namespace mscclpp {

class Bootstrap {
 public:
  Bootstrap() = default;
  virtual ~Bootstrap() = default;
  virtual int getRank() const = 0;
  virtual int getNranks() const = 0;
  virtual int getNranksPerNode() const = 0;
  virtual void send(void* data, int size, int peer, int tag) = 0;
  virtual void recv(void* data, int size, int peer, int tag) = 0;
  virtual void allGather(void* allData, int size) = 0;
  virtual void barrier() = 0;
  // Virtual with a default (the adapter overrides it, as MSCCL++'s TcpBootstrap does).
  virtual int getNranksPerIpcDomain() const { return getNranksPerNode(); }

  // Non-virtual helpers over the virtual ones (size first, then the bytes).
  void send(const std::vector<char>& data, int peer, int tag) {
    int size = static_cast<int>(data.size());
    send(&size, sizeof size, peer, tag);
    send(const_cast<char*>(data.data()), size, peer, tag);
  }
  void recv(std::vector<char>& data, int peer, int tag) {
    int size = 0;
    recv(&size, sizeof size, peer, tag);
    data.resize(static_cast<std::size_t>(size));
    recv(data.data(), size, peer, tag);
  }
};

class Communicator {
 public:
  explicit Communicator(std::shared_ptr<Bootstrap> bootstrap) : bootstrap_(std::move(bootstrap)) {}
  std::shared_ptr<Bootstrap> bootstrap() { return bootstrap_; }

 private:
  std::shared_ptr<Bootstrap> bootstrap_;
};

}  // namespace mscclpp
