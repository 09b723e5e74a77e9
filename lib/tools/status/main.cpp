// tether-status: where is every rank of a running job? (docs/troubleshooting.md,
// "Where is every rank?"). Given what the ranks were given — the unique id
// text (--uid, TETHER_UID, --uid-file, TETHER_UID_FILE) or the root address
// (--root, TETHER_ROOT) with TETHER_SECRET / the job id variables — it asks
// rank 0 for every rank's address and every rank where it is, as an observer
// that proves the job's secret. Exit status: 0 every rank answered, 1 some
// did not (or are lost), 2 nothing could be asked.
#include <fmt/format.h>

#include <cstdio>
#include <cxxopts.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/env.hpp"
#include "base/settings.hpp"
#include "core/job_identity.hpp"
#include "core/unique_id_layout.hpp"
#include "report.hpp"
#include "roll_call.hpp"
#include "tether/error.hpp"

using namespace tether;

namespace {

// Per rank up to this many ranks, grouped above (unless --per-rank / --summary).
constexpr std::size_t kPerRankUpTo = 32;

std::string firstLineOf(const std::string& path, const char* from) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line))
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("{} '{}' cannot be read (rank 0 removes its TETHER_UID_FILE once the job has started: "
                            "keep a copy, or give --uid)",
                            from, path));
  return line;
}

UniqueId jobId(const cxxopts::ParseResult& args) {
  const auto values = settings::Values::read("tether-status: ");
  if (args.count("uid")) return UniqueId::fromString(args["uid"].as<std::string>());
  if (args.count("uid-file")) return UniqueId::fromString(firstLineOf(args["uid-file"].as<std::string>(), "--uid-file"));
  if (args.count("root")) return job::uniqueIdFromRoot(values, args["root"].as<std::string>());
  if (auto text = values.text("TETHER_UID")) return UniqueId::fromString(*text);
  if (auto path = values.text("TETHER_UID_FILE")) return UniqueId::fromString(firstLineOf(*path, "TETHER_UID_FILE"));
  if (auto root = values.text("TETHER_ROOT")) return job::uniqueIdFromRoot(values, *root);
  throw Error(ErrorCode::InvalidArgument,
              "no job given: pass --uid, --uid-file or --root (with TETHER_SECRET or the job's id variables as the "
              "ranks had them), or set TETHER_UID, TETHER_UID_FILE or TETHER_ROOT");
}

int fail(bool asJson, const std::string& what) {
  if (asJson) std::fputs((nlohmann::json{{"error", what}}.dump() + "\n").c_str(), stdout);
  std::fprintf(stderr, "tether-status: %s\n", what.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  cxxopts::Options opts("tether-status", "Where is every rank of a running tether job?");
  opts.add_options()("uid", "the job's unique id text (as the ranks got it)", cxxopts::value<std::string>())(
      "uid-file", "a file whose first line is the unique id", cxxopts::value<std::string>())(
      "root", "the root address host:port, as the ranks got it in TETHER_ROOT", cxxopts::value<std::string>())(
      "json", "JSON for tools")("per-rank", "a line per rank, however many")("summary", "ranks grouped by state")(
      "timeout-ms", "how long each rank has to answer", cxxopts::value<int>()->default_value("2000"))(
      "parallel", "ranks asked at once", cxxopts::value<int>()->default_value("256"))("h,help", "this text");
  bool asJson = false;
  try {
    auto args = opts.parse(argc, argv);
    if (args.count("help")) {
      std::fputs(opts.help().c_str(), stdout);
      return 0;
    }
    asJson = args.count("json") > 0;
    const int timeoutMs = args["timeout-ms"].as<int>();
    const int parallel = args["parallel"].as<int>();
    if (timeoutMs <= 0 || parallel <= 0) return fail(asJson, "--timeout-ms and --parallel must be positive");
    const auto fields = uid::parse(jobId(args));
    status::Job job{fields.root, fields.secret, uid::worldId(fields.secret)};
    const auto rc = status::rollCall(job, std::chrono::milliseconds(timeoutMs), parallel);
    const bool perRank = args.count("per-rank") || (!args.count("summary") && rc.ranks.size() <= kPerRankUpTo);
    std::fputs((asJson ? status::json(rc) : status::text(rc, perRank)).c_str(), stdout);
    for (const auto& r : rc.ranks)
      if (r.state != status::RankReport::State::Alive) return 1;
    return 0;
  } catch (const std::exception& e) {
    return fail(asJson, e.what());
  }
}
