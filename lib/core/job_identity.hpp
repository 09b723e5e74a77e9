// What names this job in the launch environment: mixed into the secret of an
// id derived from the root address alone (uniqueIdFromRoot), so two jobs that
// share a MASTER_ADDR/MASTER_PORT or TETHER_ROOT never join one world
// (docs/security.md).
#pragma once

#include <string>

#include "base/layer.hpp"

TETHER_LAYER(6, "core");

namespace tether::job {

// "VAR=value" for every job variable set, in a fixed order, joined by ';':
// TETHER_JOB_ID alone when it is set (it overrides the launchers'), else
// TORCHELASTIC_RUN_ID, SLURM_JOB_ID (with SLURM_STEP_ID), PMIX_NAMESPACE and
// OMPI_MCA_ess_base_jobid. Empty when none is set.
std::string identity();

}  // namespace tether::job
