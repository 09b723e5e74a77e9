// What names this job in the launch environment: mixed into the secret of an
// id derived from the root address alone (uniqueIdFromRoot), so two jobs that
// share a MASTER_ADDR/MASTER_PORT or TETHER_ROOT never join one world
// (docs/security.md).
#pragma once

#include <string>

#include "base/layer.hpp"
#include "base/settings.hpp"
#include "tether/unique_id.hpp"

TETHER_LAYER(6, "core");

namespace tether::job {

// "VAR=value" for every job variable set, in a fixed order, joined by ';':
// TETHER_JOB_ID alone when it is set (it overrides the launchers'), else
// TORCHELASTIC_RUN_ID, SLURM_JOB_ID (with SLURM_STEP_ID), PMIX_NAMESPACE and
// OMPI_MCA_ess_base_jobid. Empty when none is set. TETHER_JOB_ID comes from
// `values` (the configuration read at start); the launchers' variables are
// read now.
std::string identity(const settings::Values& values);

// TcpBootstrap::uniqueIdFromRoot with the configuration read at the caller's
// start: the secret is TETHER_SECRET from `values`, else derived from the
// address and identity(values).
UniqueId uniqueIdFromRoot(const settings::Values& values, const std::string& rootHostPort);

}  // namespace tether::job
