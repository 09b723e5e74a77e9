// Built when libibverbs is not available: only --verbs=none/auto work.
#include "rdma_flow.hpp"

RdmaFlowResult runRdmaFlow(tether::Bootstrap&, const std::string& mode) {
  if (mode == "real" || mode == "fake")
    throw tether::Error(tether::ErrorCode::InvalidArgument,
                        "--verbs=" + mode + ": this build has no RDMA module (libibverbs-dev was not found)");
  RdmaFlowResult r;
  r.note = "built without libibverbs: no queue pairs";
  return r;
}
