#include "scenario.hpp"

#include <stdexcept>

namespace tether::sim {

dc::Op parseOp(const std::string& name) {
  for (dc::Op op : {dc::Op::Allgather, dc::Op::Alltoall, dc::Op::Alltoallv, dc::Op::Broadcast, dc::Op::Barrier})
    if (name == dc::opName(op)) return op;
  throw std::invalid_argument("unknown operation '" + name +
                              "' (use init|allgather|alltoall|alltoallv|broadcast|barrier)");
}

namespace {

CollectiveSpec specFor(const Scenario& s, dc::Op op) {
  CollectiveSpec spec;
  spec.op = op;
  spec.bytes = s.bytes;
  spec.root = s.root;
  spec.calls = s.calls;
  spec.mode = s.mode;
  spec.budget = s.budget;
  spec.seed = s.params.seed;
  spec.treeRadix = s.params.treeRadix;
  auto it = s.forced.find(dc::opName(op));
  if (it != s.forced.end()) spec.forced = it->second;
  return spec;
}

bool countsInTotal(const std::string& op) { return op == "init" || op == "allgather" || op == "alltoall"; }

}  // namespace

ScenarioResult runScenario(const Scenario& s, const std::function<void(const OpResult&)>& row) {
  ScenarioResult out;
  auto keep = [&](std::vector<OpResult>& into, OpResult r) {
    if (row) row(r);
    if (r.who == "tether" && countsInTotal(r.op)) out.tetherTotalUs += r.firstUs;
    into.push_back(std::move(r));
  };
  bool cpuBound = s.params.cpuBound();
  {
    Engine world(s.params);
    for (const std::string& op : s.ops) {
      if (op == "init") {
        InitOutcome init = runRendezvous(world, s.rendezvous, "tether");
        cpuBound = init.cpuBound;
        keep(out.tether, std::move(init.result));
        continue;
      }
      keep(out.tether, runCollective(world, specFor(s, parseOp(op)), cpuBound));
    }
  }
  if (!s.anchors) return out;
  Engine anchors(s.params);
  InitOutcome star = runRendezvous(anchors, "star", "anchor");
  out.anchorTotalUs += star.result.firstUs;
  keep(out.anchors, std::move(star.result));
  CollectiveSpec ring = specFor(s, dc::Op::Allgather);
  ring.forced = "ring";
  OpResult r = runCollective(anchors, ring, cpuBound);
  r.who = "anchor";
  out.anchorTotalUs += r.firstUs;
  keep(out.anchors, std::move(r));
  return out;
}

}  // namespace tether::sim
