// Launch conventions: rank, size and root from the environment of tether's own
// variables, torchrun, Open MPI, PMI and Slurm (docs/configuration.md).
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include "base/crypto.hpp"
#include "base/endpoint.hpp"
#include "base/env.hpp"
#include "base/log.hpp"
#include "base/settings.hpp"
#include "coll/select.hpp"
#include "core/job_identity.hpp"
#include "core/root_name.hpp"
#include "core/tcp_start.hpp"
#include "core/unique_id_layout.hpp"
#include "rendezvous/rendezvous.hpp"
#include "rendezvous/reserved_listener.hpp"
#include "tether/tcp_bootstrap.hpp"

namespace tether {
namespace {

Error badLaunch(const std::string& what) { return Error(ErrorCode::InvalidArgument, "fromEnvironment: " + what); }

struct Launcher {
  const char* rankVar;
  const char* sizeVar;
  const char* name;
  std::vector<const char*> jobVars;  // variables naming this launch (first set wins)
};

// In precedence order. tether's own pair overrides everything; Slurm is the
// outer launch (srun and sbatch routinely run torchrun or mpirun, whose ranks
// then differ from SLURM_PROCID), used only when no other launcher is present.
const std::vector<Launcher>& launchers() {
  static const std::vector<Launcher> all = {
      {"TETHER_RANK", "TETHER_NRANKS", "tether", {}},
      {"RANK", "WORLD_SIZE", "torchrun", {"TORCHELASTIC_RUN_ID"}},
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "Open MPI", {"OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"}},
      {"PMI_RANK", "PMI_SIZE", "PMI", {}},
      {"SLURM_PROCID", "SLURM_NTASKS", "Slurm", {"SLURM_JOB_ID"}},
  };
  return all;
}

struct RankSize {
  int rank = -1, size = -1;
  const Launcher* from = nullptr;
  std::string text() const {
    return fmt::format("{}={} {}={} ({})", from->rankVar, rank, from->sizeVar, size, from->name);
  }
};

// The launcher's pair if both are set; a half-set pair names the missing one.
std::optional<RankSize> readPair(const Launcher& l) {
  auto rank = env::getInt(l.rankVar), size = env::getInt(l.sizeVar);
  if (!rank && !size) return std::nullopt;
  if (!rank || !size) {
    const char* set = rank ? l.rankVar : l.sizeVar;
    throw badLaunch(fmt::format("{}={} is set but {} is not ({} sets both; unset a leftover, or set the other)", set,
                                rank ? *rank : *size, rank ? l.sizeVar : l.rankVar, l.name));
  }
  RankSize rs{static_cast<int>(*rank), static_cast<int>(*size), &l};
  if (*size < 1 || *size > (1 << 30) || *rank < 0 || *rank >= *size)
    throw badLaunch(fmt::format("{}={} with {}={} is not a rank of the world", l.rankVar, *rank, l.sizeVar, *size));
  return rs;
}

RankSize rankAndSize() {
  const auto& all = launchers();
  if (auto own = readPair(all.front())) return *own;  // explicit: no checks against launchers
  std::optional<RankSize> chosen;
  for (std::size_t i = 1; i + 1 < all.size(); ++i) {
    auto rs = readPair(all[i]);
    if (!rs) continue;
    if (!chosen) {
      chosen = rs;
    } else if (rs->rank != chosen->rank || rs->size != chosen->size) {
      throw badLaunch(fmt::format(
          "launchers disagree: {} but {}; one is a leftover from another launch. Unset the stale variables, or set "
          "TETHER_RANK and TETHER_NRANKS to choose",
          chosen->text(), rs->text()));
    }
  }
  if (chosen) return *chosen;
  if (auto slurm = readPair(all.back())) return *slurm;
  throw badLaunch(
      "no rank/size in the environment: set TETHER_RANK and TETHER_NRANKS (or launch with torchrun, mpirun, a PMI "
      "launcher or srun)");
}

// What names this launch, so a TETHER_UID_FILE of another run is recognised:
// TETHER_JOB_ID, else the job variable of the launcher that gave the ranks,
// else any launcher's. Empty when nothing does.
std::string jobTag(const settings::Values& values, const Launcher& from) {
  auto tagOf = [](const char* var) -> std::optional<std::string> {
    if (auto v = env::get(var)) return std::string(var) + "=" + *v;
    return std::nullopt;
  };
  if (auto own = values.text("TETHER_JOB_ID")) return "TETHER_JOB_ID=" + *own;
  for (const char* var : from.jobVars) {
    if (auto t = tagOf(var)) {
      // Every task of one srun step shares the step id; reruns in one allocation do not.
      if (std::string(from.name) == "Slurm")
        if (auto step = env::get("SLURM_STEP_ID")) *t += "." + *step;
      return *t;
    }
  }
  for (const auto& l : launchers())
    for (const char* var : l.jobVars)
      if (auto t = tagOf(var)) return *t;
  return {};
}

std::string describeJob(const std::string& tag) { return tag.empty() ? "a run without a job id" : "job " + tag; }

// The file of a run: TETHER_UID_FILE itself for a run without a job id, else
// "<TETHER_UID_FILE>.<job>" (the job tag with every character but letters,
// digits, '.', '-' and '_' as '_'), so two jobs sharing the path never
// overwrite each other's id (docs/configuration.md).
std::string uidFilePath(const std::string& path, const std::string& job) {
  if (job.empty()) return path;
  std::string name = path + ".";
  for (char c : job) name.push_back(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' ? c : '_');
  return name;
}

// The file holds the id on its first line and "job <tag>" on the second.
struct UidFileContents {
  std::string idText, job;
};

std::string errnoText(int err) { return std::strerror(err); }

// The file's contents; nullopt while it does not exist yet (or is empty: a
// path made with mktemp before rank 0 writes it). Anything else that is not
// an id — unreadable, a directory, garbage — throws, naming the reason.
std::optional<UidFileContents> readContents(const std::string& path, int rank) {
  auto bad = [&](const std::string& why) {
    return Error(ErrorCode::InvalidArgument, fmt::format("rank {}: TETHER_UID_FILE '{}' {}", rank, path, why), rank);
  };
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return std::nullopt;
    throw bad("cannot be read: " + errnoText(errno));
  }
  std::string text;
  struct stat st {};
  int err = ::fstat(fd, &st) != 0 ? errno : 0;
  if (!err && !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw bad(S_ISDIR(st.st_mode) ? "is a directory, not a file" : "is not a regular file");
  }
  char buf[4096];
  while (!err && text.size() < 64 * 1024) {
    ssize_t got = ::read(fd, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) err = errno;
    if (got <= 0) break;
    text.append(buf, static_cast<std::size_t>(got));
  }
  ::close(fd);
  if (err) throw bad("cannot be read: " + errnoText(err));
  if (text.empty()) return std::nullopt;
  UidFileContents c;
  auto lineEnd = text.find('\n');
  c.idText = text.substr(0, lineEnd);
  std::string rest = lineEnd == std::string::npos ? "" : text.substr(lineEnd + 1);
  if (!rest.empty() && rest.back() == '\n') rest.pop_back();
  if (!rest.empty()) {
    if (rest.rfind("job ", 0) != 0 || rest.find('\n') != std::string::npos)
      throw bad("holds more than an id and its \"job ...\" line (not written by tether?)");
    c.job = rest.substr(4);
  }
  try {
    UniqueId::fromString(c.idText);
  } catch (const Error& e) {
    throw bad(fmt::format("does not hold a tether id (not written by tether?): {}", e.what()));
  }
  return c;
}

UniqueId readUidFile(const std::string& path, const std::string& job, int rank, std::chrono::milliseconds timeout) {
  // The file appears when rank 0 writes it; renamed into place, so it is never
  // read half-written. A file of another job (left by an earlier run, or a
  // job whose tag maps to the same name) is ignored until rank 0 of this job
  // replaces it.
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto wait = std::chrono::milliseconds(5);
  std::optional<std::string> otherJob;
  for (;;) {
    if (auto c = readContents(path, rank)) {
      if (c->job == job) return UniqueId::fromString(c->idText);
      if (otherJob != c->job)
        log::info(rank, "ignoring TETHER_UID_FILE '{}' of {} (this rank is in {}); waiting for rank 0 to replace it",
                  path, describeJob(c->job), describeJob(job));
      otherJob = c->job;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      if (otherJob)
        throw Error(
            ErrorCode::Timeout,
            fmt::format("rank {}: TETHER_UID_FILE '{}' still holds the id of {} (this rank is in {}) after {} ms: "
                        "is rank 0 of this job running with the same TETHER_UID_FILE?",
                        rank, path, describeJob(*otherJob), describeJob(job), timeout.count()),
            rank);
      throw Error(ErrorCode::Timeout,
                  fmt::format("rank {}: TETHER_UID_FILE '{}' ({}) did not appear within {} ms: is rank 0 running "
                              "with the same TETHER_UID_FILE and job id?",
                              rank, path, describeJob(job), timeout.count()),
                  rank);
    }
    std::this_thread::sleep_for(wait);
    wait = std::min(wait * 2, std::chrono::milliseconds(200));
  }
}

void writeUidFile(const std::string& path, const UniqueId& id, const std::string& job) {
  std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  std::string text = id.toString() + "\n";
  if (!job.empty()) text += "job " + job + "\n";
  auto failed = [&](const std::string& what, int err) {
    ::unlink(tmp.c_str());
    return Error(ErrorCode::System, fmt::format("rank 0: {}: {}", what, errnoText(err)), 0);
  };
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) throw failed("cannot write TETHER_UID_FILE temporary '" + tmp + "'", errno);
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t put = ::write(fd, text.data() + done, text.size() - done);
    if (put < 0 && errno == EINTR) continue;
    if (put < 0) {
      int err = errno;
      ::close(fd);
      throw failed("cannot write TETHER_UID_FILE temporary '" + tmp + "'", err);
    }
    done += static_cast<std::size_t>(put);
  }
  if (::close(fd) != 0) throw failed("cannot write TETHER_UID_FILE temporary '" + tmp + "'", errno);
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw failed("cannot rename '" + tmp + "' to TETHER_UID_FILE '" + path + "'", errno);
}

// Rank 0 removes its TETHER_UID_FILE once its construction has returned —
// every rank has registered, so every rank has read it — or failed. A file
// another run has since written is left alone.
struct UidFileRemover {
  UidFileRemover(std::string p, std::string id) : path(std::move(p)), idText(std::move(id)) {}
  UidFileRemover(const UidFileRemover&) = delete;
  UidFileRemover& operator=(const UidFileRemover&) = delete;
  std::string path, idText;
  ~UidFileRemover() {
    try {
      auto c = readContents(path, 0);
      if (c && c->idText == idText) std::remove(path.c_str());
    } catch (const Error&) {
      // Replaced by something that is not an id: not ours to remove.
    }
  }
};

std::string checkedPort(const std::string& text) {
  unsigned port = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
  if (ec != std::errc() || end != text.data() + text.size() || port < 1 || port > 65535)
    throw badLaunch("MASTER_PORT='" + text + "' is not a port number (1-65535)");
  return text;
}

// make(value), with an error naming the variable (and the value, unless it is
// secret).
template <class F>
UniqueId fromVariable(const char* var, const std::string& value, bool secret, F&& make) {
  try {
    return make(value);
  } catch (const Error& e) {
    throw badLaunch(secret ? fmt::format("{}: {}", var, e.what()) : fmt::format("{}='{}': {}", var, value, e.what()));
  }
}

// TETHER_RENDEZVOUS=pmix: no root and no id to share. Each rank's "root" is
// its own listen address (rank 0 listens there on a port it reserves; the
// others choose their address the same way); nobody dials it, the addresses
// come from PMIx.
// The secret is derived from PMIX_NAMESPACE (or TETHER_SECRET): like an
// address-only root, it guards against accidents, not attackers
// (docs/security.md).
std::shared_ptr<Communicator> fromPmix(const settings::Values& values, const TcpOptions& options) {
  if (!rdv::havePmix()) throw Error(ErrorCode::InvalidArgument, rdv::kNoPmixText);
  auto nspace = env::get("PMIX_NAMESPACE");
  if (!nspace || !env::get("PMIX_RANK"))
    throw badLaunch(
        "TETHER_RENDEZVOUS=pmix but PMIX_RANK and PMIX_NAMESPACE are not set: launch under a PMIx "
        "launcher (mpirun, srun --mpi=pmix, prterun), or choose another TETHER_RENDEZVOUS");
  // Rank and size from the launcher variables as usual; under a PMIx launcher
  // that sets none of them (only PMIX_RANK), from PMIx itself.
  bool anyPair = false;
  for (const auto& l : launchers()) anyPair = anyPair || env::get(l.rankVar) || env::get(l.sizeVar);
  RankSize rs;
  if (anyPair) {
    rs = rankAndSize();
  } else {
    static const Launcher pmixLauncher{"PMIX_RANK", "PMIX_JOB_SIZE", "PMIx", {"PMIX_NAMESPACE"}};
    auto p = rdv::pmixRankAndSize();
    rs = RankSize{p.rank, p.size, &pmixLauncher};
  }
  uid::Fields f;
  f.version = wire::kProtocolVersion;
  f.root = toPeerAddress(
      tcp::endpoint(
          chooseListenAddress(asio::ip::address_v4::any(), options.listenHost, interfaceFilter(values), rs.rank), 0),
      0);
  // Rank 0 listens at the root address: a port reserved here, which World
  // takes over. The others never dial it; a UniqueId needs a port.
  if (rs.rank == 0)
    f.root = reserved::reserve(f.root);
  else
    f.root.port = 1;
  auto secretText = values.text("TETHER_SECRET").value_or("tether-pmix-namespace:" + *nspace);
  auto d = crypto::sha256(secretText.data(), secretText.size());
  std::copy_n(d.begin(), f.secret.size(), f.secret.begin());
  log::info(rs.rank, "rank {} of {} from {}; addresses from PMIx (namespace '{}')", rs.rank, rs.size, rs.text(),
            *nspace);
  return startTcpWorld(rs.rank, rs.size, uid::make(f), options, values);
}

}  // namespace

std::unique_ptr<TcpBootstrap> TcpBootstrap::fromEnvironment(const TcpOptions& options) {
  (void)logLevel();  // reads TETHER_DEBUG now: a bad value is reported even if the launch fails
  // Every TETHER_* variable, read and checked before a uid file or a socket.
  const auto values = settings::Values::read("fromEnvironment: ");
  coll::checkSettings(values.text("TETHER_ALGO"), "fromEnvironment: ");  // text in the table: coll checks it
  if (values.text("TETHER_RENDEZVOUS") == std::optional<std::string>("pmix"))
    return std::unique_ptr<TcpBootstrap>(new TcpBootstrap(fromPmix(values, options)));
  auto rs = rankAndSize();
  auto timeout = env::resolveTimeout(options.timeout, fmt::format("rank {}: TcpOptions::timeout", rs.rank));
  UniqueId id;
  std::string root;
  std::optional<UidFileRemover> remover;
  if (auto text = values.text("TETHER_UID")) {
    id = fromVariable("TETHER_UID", *text, true, [](const std::string& t) { return UniqueId::fromString(t); });
    root = "TETHER_UID";
  } else if (auto given = values.text("TETHER_UID_FILE")) {
    auto job = jobTag(values, *rs.from);
    auto path = uidFilePath(*given, job);
    if (rs.rank == 0) {
      id = createUniqueId(
          toString(tcp::endpoint(chooseListenAddress(asio::ip::address_v4::any(), "", interfaceFilter(values), 0), 0)));
      writeUidFile(path, id, job);
      remover.emplace(path, id.toString());
    } else {
      id = readUidFile(path, job, rs.rank, timeout);
    }
    root = fmt::format("TETHER_UID_FILE '{}' ({})", path, describeJob(job));
  } else if (auto hostPort = values.text("TETHER_ROOT")) {
    job::waitForRootName(rs.rank, "TETHER_ROOT", *hostPort, timeout);
    id = fromVariable("TETHER_ROOT", *hostPort, false,
                      [&](const std::string& t) { return job::uniqueIdFromRoot(values, t); });
    root = "TETHER_ROOT";
  } else if (auto addr = env::get("MASTER_ADDR")) {
    auto port = env::get("MASTER_PORT");
    if (!port) throw badLaunch("MASTER_ADDR is set but MASTER_PORT is not");
    auto hostPort = addr->find(':') != std::string::npos ? "[" + *addr + "]:" + checkedPort(*port)
                                                         : *addr + ":" + checkedPort(*port);
    job::waitForRootName(rs.rank, "MASTER_ADDR", hostPort, timeout);
    id = fromVariable("MASTER_ADDR", *addr, false,
                      [&](const std::string&) { return job::uniqueIdFromRoot(values, hostPort); });
    root = "MASTER_ADDR/MASTER_PORT";
  } else if (env::get("MASTER_PORT")) {
    throw badLaunch("MASTER_PORT is set but MASTER_ADDR is not");
  } else {
    throw badLaunch(
        "no root in the environment: set TETHER_UID, TETHER_UID_FILE, TETHER_ROOT or "
        "MASTER_ADDR/MASTER_PORT");
  }
  log::info(rs.rank, "rank {} of {} from {}; root from {}", rs.rank, rs.size, rs.text(), root);
  return std::unique_ptr<TcpBootstrap>(new TcpBootstrap(startTcpWorld(rs.rank, rs.size, id, options, values)));
}

}  // namespace tether
