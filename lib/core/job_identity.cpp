#include "core/job_identity.hpp"

#include "base/env.hpp"

namespace tether::job {

std::string identity(const settings::Values& values) {
  if (auto own = values.text("TETHER_JOB_ID")) return "TETHER_JOB_ID=" + *own;
  std::string text;
  auto add = [&](const char* var, const std::string& value) {
    if (!text.empty()) text += ';';
    text += std::string(var) + "=" + value;
  };
  if (auto v = env::get("TORCHELASTIC_RUN_ID")) add("TORCHELASTIC_RUN_ID", *v);
  if (auto v = env::get("SLURM_JOB_ID")) {
    // Every task of one srun step shares the step id; two steps of one allocation do not.
    auto step = env::get("SLURM_STEP_ID");
    add("SLURM_JOB_ID", step ? *v + "." + *step : *v);
  }
  if (auto v = env::get("PMIX_NAMESPACE")) add("PMIX_NAMESPACE", *v);
  if (auto v = env::get("OMPI_MCA_ess_base_jobid")) add("OMPI_MCA_ess_base_jobid", *v);
  return text;
}

}  // namespace tether::job
