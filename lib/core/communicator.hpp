// TcpBootstrap::Impl: one communicator — a group over a shared World.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "collectives/context.hpp"
#include "core/world.hpp"
#include "tether/tcp_bootstrap.hpp"

namespace tether {

struct TcpBootstrap::Impl {
  std::shared_ptr<World> world;
  coll::Group group;
  int nranksPerNode = 1;
  bool cpuBound = false;  // more ranks of the world on this host than cores
  std::atomic<std::int64_t> timeoutMs{300000};

  // Collectives of one communicator are serialized by contract; the mutex
  // turns a violation into ordered calls instead of corrupt state.
  std::mutex collMutex;
  std::uint64_t nextColl = 1;
  std::uint64_t splits = 0;
  std::map<std::vector<int>, std::uint64_t> subsetCalls;
  std::string brokenBy;  // set when a collective failed

  std::chrono::steady_clock::time_point deadline() const {
    return std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs.load());
  }
  // Runs one collective: next id, algorithm coroutine, deadline, error bookkeeping.
  void collective(wire::OpCode code, const coll::Group& g, std::uint64_t coll,
                  std::function<boost::asio::awaitable<void>(coll::Context&)> algo);
  void collective(wire::OpCode code, std::function<boost::asio::awaitable<void>(coll::Context&)> algo);
  void checkPeer(int peer, const char* what) const;
};

}  // namespace tether
