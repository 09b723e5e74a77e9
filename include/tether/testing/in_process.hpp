// tether/testing/in_process.hpp — an in-process world whose N ranks are threads.
//
// Lets a runtime unit-test its bootstrap code without sockets: every rank gets
// a tether::Bootstrap with the same semantics and errors as TcpBootstrap
// (full-key matching, per-communicator collective ids, Protocol errors naming
// both operations, deadlines, abort notices reaching every rank).
//
//   tether::testing::InProcessWorld world(4);
//   world.run([](tether::Bootstrap& b) {
//     std::vector<int> all(b.size());
//     all[b.rank()] = b.rank();
//     b.allgather(all.data(), sizeof(int));
//   });
//
// Header-only, C++17; depends only on the standard library and tether's own
// headers (the contract's code in tether/detail/, shared with TcpBootstrap).
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tether/bootstrap.hpp"
#include "tether/error.hpp"
#include "tether/testing/in_process_bootstrap.hpp"

namespace tether {
namespace testing {

class InProcessWorld {
 public:
  // `nranksPerNode` ranks share a "node" (consecutive world ranks); 0 = all on one.
  explicit InProcessWorld(int nranks, int nranksPerNode = 0) {
    if (nranks < 1) {
      throw Error(ErrorCode::InvalidArgument, "InProcessWorld: nranks must be positive, got " + std::to_string(nranks));
    }
    if (nranksPerNode < 0 || nranksPerNode > nranks) {
      throw Error(ErrorCode::InvalidArgument, "InProcessWorld: nranksPerNode " + std::to_string(nranksPerNode) +
                                                  " outside 0.." + std::to_string(nranks));
    }
    state_ = std::make_shared<detail::WorldState>(nranks, nranksPerNode == 0 ? nranks : nranksPerNode);
    std::vector<int> members;
    for (int r = 0; r < nranks; ++r) members.push_back(r);
    for (int r = 0; r < nranks; ++r) {
      ranks_.push_back(std::make_shared<InProcessBootstrap>(state_, 0, members, r, state_->defaultTimeout));
    }
  }

  InProcessWorld(const InProcessWorld&) = delete;
  InProcessWorld& operator=(const InProcessWorld&) = delete;
  InProcessWorld(InProcessWorld&&) = default;
  InProcessWorld& operator=(InProcessWorld&&) = default;

  int size() const { return static_cast<int>(ranks_.size()); }

  // The world communicator of `rank` (the same object on every call).
  std::shared_ptr<Bootstrap> bootstrap(int rank) const {
    if (rank < 0 || rank >= size()) {
      throw Error(ErrorCode::InvalidArgument, "InProcessWorld: rank " + std::to_string(rank) + " out of range (size " +
                                                  std::to_string(size()) + ")");
    }
    return ranks_[static_cast<std::size_t>(rank)];
  }

  // Runs `body` on one thread per rank and joins them all. If a body throws,
  // the world is aborted (so the other ranks do not sit out their deadline) and
  // the first exception is rethrown; a tether::Error is rethrown with the other
  // ranks' failures appended to its message, anything else as it was (the
  // others then go to stderr).
  void run(const std::function<void(Bootstrap&)>& body) {
    std::mutex failuresMutex;
    std::vector<std::pair<int, std::exception_ptr>> failures;  // in the order they happened
    std::vector<std::thread> threads;
    threads.reserve(ranks_.size());
    for (int r = 0; r < size(); ++r) state_->setLeft(r, false);
    auto rankMain = [&](int r) {
      try {
        body(*ranks_[static_cast<std::size_t>(r)]);
        state_->setLeft(r, true);  // like a closed TcpBootstrap: peers waiting on it fail at once
      } catch (...) {
        {
          std::lock_guard<std::mutex> lock(failuresMutex);
          failures.emplace_back(r, std::current_exception());
        }
        state_->abortAll(r, "its body threw: " + messageOf(std::current_exception()));
      }
    };
    try {
      for (int r = 0; r < size(); ++r) threads.emplace_back(rankMain, r);
    } catch (...) {  // no thread for a rank: stop the ones started, then report
      state_->abortAll(-1, "InProcessWorld::run could not start a thread per rank");
      for (auto& thread : threads) thread.join();
      throw;
    }
    for (auto& thread : threads) thread.join();
    // Ranks "left" only while the run lasts: after it, the bootstraps may be
    // driven from the caller's own threads again.
    for (int r = 0; r < size(); ++r) state_->setLeft(r, false);
    if (failures.empty()) return;

    // The failure to report is the first one that is not merely the abort
    // another rank's failure caused (a bystander may wake with Aborted
    // before the original failure is recorded).
    std::size_t first = 0;
    for (std::size_t i = 0; i < failures.size(); ++i) {
      if (!isAbortedError(failures[i].second)) {
        first = i;
        break;
      }
    }
    std::string others;
    for (std::size_t i = 0; i < failures.size(); ++i) {
      if (i == first) continue;
      others += "; also failed: rank " + std::to_string(failures[i].first) + ": " + messageOf(failures[i].second);
    }
    try {
      std::rethrow_exception(failures[first].second);
    } catch (const Error& error) {
      if (others.empty()) throw;
      throw Error(error.code(), error.what() + others, error.rank(), error.peer());
    } catch (...) {
      if (!others.empty()) std::cerr << "InProcessWorld::run: other failures" << others << "\n";
      throw;
    }
  }

  // Ends every pending and future call of every rank with Error{Aborted}.
  void abortAll(const std::string& reason) { state_->abortAll(-1, reason); }

 private:
  static bool isAbortedError(const std::exception_ptr& failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const Error& e) {
      return e.code() == ErrorCode::Aborted;
    } catch (...) {
      return false;
    }
  }

  static std::string messageOf(const std::exception_ptr& failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      return e.what();
    } catch (...) {
      return "unknown exception";
    }
  }

  std::shared_ptr<detail::WorldState> state_;
  std::vector<std::shared_ptr<InProcessBootstrap>> ranks_;
};

}  // namespace testing
}  // namespace tether
