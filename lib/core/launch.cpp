// Launch conventions: rank, size and root from the environment of tether's own
// variables, torchrun, Open MPI, PMI and Slurm (docs/configuration.md).
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/env.hpp"
#include "base/log.hpp"
#include "tether/tcp_bootstrap.hpp"

namespace tether {
namespace {

struct RankSize {
  int rank = -1, size = -1;
  const char* source = nullptr;
};

RankSize rankAndSize() {
  static const std::pair<const char*, const char*> sources[] = {
      {"TETHER_RANK", "TETHER_NRANKS"}, {"RANK", "WORLD_SIZE"},     {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
      {"PMI_RANK", "PMI_SIZE"},         {"SLURM_PROCID", "SLURM_NTASKS"}};
  for (auto [r, s] : sources) {
    auto rank = env::getInt(r), size = env::getInt(s);
    if (rank && size) return {static_cast<int>(*rank), static_cast<int>(*size), r};
  }
  throw Error(ErrorCode::InvalidArgument,
              "no rank/size in the environment: set TETHER_RANK and TETHER_NRANKS (or launch with torchrun, "
              "mpirun, a PMI launcher or srun)");
}

UniqueId readUidFile(const std::string& path, std::chrono::steady_clock::time_point deadline) {
  // The file appears when rank 0 (or the launcher) writes it; renamed into
  // place, so it is never read half-written.
  auto wait = std::chrono::milliseconds(5);
  for (;;) {
    std::ifstream in(path);
    if (in) {
      std::stringstream ss;
      ss << in.rdbuf();
      return UniqueId::fromString(ss.str());
    }
    if (std::chrono::steady_clock::now() > deadline)
      throw Error(ErrorCode::Timeout, "TETHER_UID_FILE '" + path + "' did not appear before the deadline");
    std::this_thread::sleep_for(wait);
    wait = std::min(wait * 2, std::chrono::milliseconds(200));
  }
}

void writeUidFile(const std::string& path, const UniqueId& id) {
  std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  {
    std::ofstream out(tmp);
    out << id.toString() << "\n";
    if (!out) throw Error(ErrorCode::System, "cannot write TETHER_UID_FILE temporary '" + tmp + "'");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw Error(ErrorCode::System, "cannot rename '" + tmp + "' to TETHER_UID_FILE '" + path + "'");
}

}  // namespace

std::unique_ptr<TcpBootstrap> TcpBootstrap::fromEnvironment(const TcpOptions& options) {
  auto rs = rankAndSize();
  auto timeout = options.timeout.count() > 0 ? options.timeout
                                             : env::getMs("TETHER_TIMEOUT_MS", std::chrono::milliseconds(300000));
  UniqueId id;
  if (auto text = env::get("TETHER_UID")) {
    id = UniqueId::fromString(*text);
  } else if (auto path = env::get("TETHER_UID_FILE")) {
    if (rs.rank == 0) {
      id = createUniqueId();
      writeUidFile(*path, id);
    } else {
      id = readUidFile(*path, std::chrono::steady_clock::now() + timeout);
    }
  } else if (auto root = env::get("TETHER_ROOT")) {
    id = uniqueIdFromRoot(*root);
  } else if (auto addr = env::get("MASTER_ADDR")) {
    auto port = env::get("MASTER_PORT");
    if (!port) throw Error(ErrorCode::InvalidArgument, "MASTER_ADDR is set but MASTER_PORT is not");
    id = uniqueIdFromRoot(addr->find(':') != std::string::npos ? "[" + *addr + "]:" + *port : *addr + ":" + *port);
  } else {
    throw Error(ErrorCode::InvalidArgument,
                "no root in the environment: set TETHER_UID, TETHER_UID_FILE, TETHER_ROOT or MASTER_ADDR/MASTER_PORT");
  }
  log::info(rs.rank, "rank {} of {} from {}", rs.rank, rs.size, rs.source);
  return std::make_unique<TcpBootstrap>(rs.rank, rs.size, id, options);
}

}  // namespace tether
