// A run of tether-sim: tether's init and collectives, one after another on
// one simulated world (links persist between them, as in tether), and the
// anchors' algorithms (a star rendezvous, a ring all-gather of N - 1 steps)
// on a second world with the same model.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "collective.hpp"
#include "rendezvous_run.hpp"

namespace tether::sim {

struct Scenario {
  Params params;
  // "init" (the rendezvous) and collectives: allgather, alltoall, alltoallv,
  // broadcast, barrier; run in this order.
  std::vector<std::string> ops{"init", "allgather", "alltoall", "alltoallv", "broadcast", "barrier"};
  std::size_t bytes = 64;
  int calls = 1;
  int root = 0;  // broadcast
  std::string rendezvous = defaultRendezvous();
  bool anchors = true;
  Mode mode = Mode::Auto;
  double budget = 4e8;
  std::map<std::string, std::string> forced;  // operation -> table row
};

struct ScenarioResult {
  std::vector<OpResult> tether, anchors;
  // First-call times of init + allgather + alltoall (those that ran), and
  // the anchors' star init + ring all-gather.
  double tetherTotalUs = 0, anchorTotalUs = 0;
};

// The collective named `name`; throws std::invalid_argument.
dc::Op parseOp(const std::string& name);

// Runs it; `row` sees each result as soon as it exists.
ScenarioResult runScenario(const Scenario& s, const std::function<void(const OpResult&)>& row = {});

}  // namespace tether::sim
