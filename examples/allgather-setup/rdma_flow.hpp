// examples/allgather-setup/rdma_flow.hpp — the RDMA half of the all-gather setup example.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tether/bootstrap.hpp"

struct RdmaFlowResult {
  int qpsAtRts = 0;  // QPs this rank brought to RTS
  bool rdmaWriteChecked = false;
  std::string note;  // one line for the user, e.g. "no RDMA devices (ENOSYS): exchanged records without QPs"
  std::vector<std::pair<std::string, double>> phaseMs;  // per-phase timings, e.g. {"qp-exchange", 1.2}
};

// mode: "auto" | "real" | "fake" | "none". Throws tether::Error on any failure (bad record, verbs error).
//  auto: real devices when every rank has one, else placeholder records are
//        exchanged without QPs and `note` says why;
//  real: real devices or an error;
//  fake: the whole flow on the fake backend (TETHER_FAKE_LINK_LAYER=roce|ib, default roce);
//        RDMA writes run only when all ranks share this process;
//  none: placeholder records only.
RdmaFlowResult runRdmaFlow(tether::Bootstrap& boot, const std::string& mode);
