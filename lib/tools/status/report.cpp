#include "report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <unordered_set>

namespace tether::status {

namespace {

using State = RankReport::State;

bool inCall(const RankReport& r) {
  return r.state == State::Alive && r.answer && r.answer->state == wire::StallState::Running;
}

int waitsFor(const RankReport& r) {
  return inCall(r) && r.answer->waitsOn != wire::kNoRank ? static_cast<int>(r.answer->waitsOn) : -1;
}

const wire::RankDetail* detailOf(const RankReport& r) {
  return r.answer && r.answer->detail ? &*r.answer->detail : nullptr;
}

// "0-4,6,8-1023".
std::string ranges(const std::vector<int>& sorted) {
  std::string out;
  for (std::size_t i = 0; i < sorted.size();) {
    std::size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? std::to_string(sorted[i]) : fmt::format("{}-{}", sorted[i], sorted[j]);
    i = j + 1;
  }
  return out;
}

std::string seconds(std::uint64_t ms) { return fmt::format("{:.1f} s", static_cast<double>(ms) / 1000.0); }

std::string describe(const RankReport& r) {
  if (r.state != State::Alive) return fmt::format("{} ({}): {}", stateName(r.state), r.address, r.why);
  const wire::RankDetail* d = detailOf(r);
  std::string line = "alive";
  if (!inCall(r))
    line += ", not in a tether call";
  else if (d)
    line += fmt::format(", in {} for {}", d->call, seconds(d->inCallMs));
  else
    line += ", " + r.answer->doing;
  if (const int w = waitsFor(r); w >= 0) line += fmt::format(", waits for rank {}", w);
  if (d) {
    line += fmt::format(", {} link{} open", d->linksOpen, d->linksOpen == 1 ? "" : "s");
    if (!d->lastError.empty()) line += ", last error: " + d->lastError;
  }
  return line;
}

// What ranks of one group share: the state and, for a rank in a call, the
// call without its step.
std::string groupOf(const RankReport& r) {
  if (r.state != State::Alive) return stateName(r.state);
  const wire::RankDetail* d = detailOf(r);
  if (!inCall(r) || !d) return "alive, not in a tether call";
  return "alive, in " + d->call.substr(0, d->call.find(' '));
}

}  // namespace

std::vector<Behind> findBehind(const RollCall& rc) {
  const int n = static_cast<int>(rc.ranks.size());
  std::map<int, int> waiters;
  for (const auto& r : rc.ranks) {
    int cur = waitsFor(r);
    std::unordered_set<int> seen{r.rank};
    while (cur >= 0 && cur < n && !seen.count(cur)) {
      const RankReport& at = rc.ranks[static_cast<std::size_t>(cur)];
      if (!inCall(at)) {  // not answering, lost, or not in a call: the end of the chain
        ++waiters[cur];
        break;
      }
      seen.insert(cur);
      cur = waitsFor(at);  // -1: it works (waits for nobody right now)
    }
  }
  std::vector<Behind> out;
  for (const auto& [rank, count] : waiters) out.push_back({rank, count});
  std::stable_sort(out.begin(), out.end(), [](const Behind& a, const Behind& b) { return a.waiters > b.waiters; });
  return out;
}

std::string text(const RollCall& rc, bool perRank) {
  std::map<State, int> counts;
  for (const auto& r : rc.ranks) ++counts[r.state];
  std::string out = fmt::format("{} ranks, root {}, asked in {:.0f} ms: {} alive, {} no answer, {} lost\n",
                                rc.ranks.size(), rc.root, rc.elapsedMs, counts[State::Alive], counts[State::NoAnswer],
                                counts[State::Lost]);
  if (perRank) {
    for (const auto& r : rc.ranks) out += fmt::format("rank {}: {}\n", r.rank, describe(r));
  } else {
    std::map<std::string, std::vector<int>> groups;
    for (const auto& r : rc.ranks) groups[groupOf(r)].push_back(r.rank);
    for (const auto& [what, ranks] : groups)
      out += fmt::format("{}: {} rank{}: {}\n", what, ranks.size(), ranks.size() == 1 ? "" : "s", ranges(ranks));
    for (const auto& r : rc.ranks)  // each rank that is not well, in full
      if (r.state != State::Alive) out += fmt::format("rank {}: {}\n", r.rank, describe(r));
    int withError = 0;
    const RankReport* first = nullptr;
    for (const auto& r : rc.ranks)
      if (const auto* d = detailOf(r); d && !d->lastError.empty() && (++withError, !first)) first = &r;
    if (first)
      out += fmt::format("{} rank{} with a last error; rank {}: {}\n", withError, withError == 1 ? "" : "s",
                         first->rank, detailOf(*first)->lastError);
  }
  for (const auto& b : findBehind(rc)) {
    const RankReport& r = rc.ranks[static_cast<std::size_t>(b.rank)];
    out += fmt::format("behind: rank {} ({}), which {} rank{} wait{} for\n", b.rank,
                       r.state == State::Alive ? "alive, not in a tether call" : stateName(r.state), b.waiters,
                       b.waiters == 1 ? "" : "s", b.waiters == 1 ? "s" : "");
  }
  return out;
}

std::string json(const RollCall& rc) {
  nlohmann::json j;
  j["root"] = rc.root;
  j["nranks"] = rc.ranks.size();
  j["elapsed_ms"] = rc.elapsedMs;
  nlohmann::json ranks = nlohmann::json::array();
  std::map<std::string, int> counts{{"alive", 0}, {"no answer", 0}, {"lost", 0}};
  std::vector<int> noAnswer, lost;
  for (const auto& r : rc.ranks) {
    ++counts[stateName(r.state)];
    if (r.state == State::NoAnswer) noAnswer.push_back(r.rank);
    if (r.state == State::Lost) lost.push_back(r.rank);
    nlohmann::json e{{"rank", r.rank}, {"state", stateName(r.state)}, {"address", r.address}};
    if (r.state != State::Alive) {
      e["why"] = r.why;
    } else {
      e["in_call"] = inCall(r);
      e["doing"] = r.answer->doing;
      const int w = waitsFor(r);
      e["waits_for"] = w >= 0 ? nlohmann::json(w) : nlohmann::json(nullptr);
      if (const auto* d = detailOf(r)) {
        e["call"] = d->call;
        e["in_call_ms"] = d->inCallMs;
        e["links_open"] = d->linksOpen;
        e["last_error"] = d->lastError;
      }
    }
    ranks.push_back(std::move(e));
  }
  j["counts"] = counts;
  j["no_answer"] = noAnswer;
  j["lost"] = lost;
  nlohmann::json behind = nlohmann::json::array();
  for (const auto& b : findBehind(rc))
    behind.push_back({{"rank", b.rank},
                      {"state", stateName(rc.ranks[static_cast<std::size_t>(b.rank)].state)},
                      {"waiters", b.waiters}});
  j["behind"] = behind;
  j["ranks"] = ranks;
  return j.dump(1) + "\n";
}

}  // namespace tether::status
