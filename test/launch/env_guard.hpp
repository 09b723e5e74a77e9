// Launch-environment tests: every variable fromEnvironment() may read is
// cleared for the test and restored afterwards, so the machine's own launcher
// variables (a CI job under Slurm, a leftover RANK) cannot leak in.
#pragma once

#include <cstdlib>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tether::test {

inline const std::vector<std::string>& launchVariables() {
  static const std::vector<std::string> names = {"TETHER_RANK",
                                                 "TETHER_NRANKS",
                                                 "RANK",
                                                 "WORLD_SIZE",
                                                 "OMPI_COMM_WORLD_RANK",
                                                 "OMPI_COMM_WORLD_SIZE",
                                                 "PMI_RANK",
                                                 "PMI_SIZE",
                                                 "SLURM_PROCID",
                                                 "SLURM_NTASKS",
                                                 "TETHER_UID",
                                                 "TETHER_UID_FILE",
                                                 "TETHER_ROOT",
                                                 "MASTER_ADDR",
                                                 "MASTER_PORT",
                                                 "TETHER_SECRET",
                                                 "TETHER_JOB_ID",
                                                 "TORCHELASTIC_RUN_ID",
                                                 "OMPI_MCA_ess_base_jobid",
                                                 "PMIX_NAMESPACE",
                                                 "SLURM_JOB_ID",
                                                 "SLURM_STEP_ID",
                                                 "TETHER_TIMEOUT_MS"};
  return names;
}

class EnvGuard {
 public:
  // Clears every launch variable, then sets `vars`.
  explicit EnvGuard(std::initializer_list<std::pair<std::string, std::string>> vars = {}) {
    for (const auto& name : launchVariables()) {
      const char* v = std::getenv(name.c_str());
      saved_[name] = v ? std::optional<std::string>(v) : std::nullopt;
      ::unsetenv(name.c_str());
    }
    for (const auto& [name, value] : vars) set(name, value);
  }
  ~EnvGuard() {
    for (const auto& [name, value] : saved_) {
      if (value)
        ::setenv(name.c_str(), value->c_str(), 1);
      else
        ::unsetenv(name.c_str());
    }
  }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;

  void set(const std::string& name, const std::string& value) {
    if (!saved_.count(name)) {
      const char* v = std::getenv(name.c_str());
      saved_[name] = v ? std::optional<std::string>(v) : std::nullopt;
    }
    ::setenv(name.c_str(), value.c_str(), 1);
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

}  // namespace tether::test
