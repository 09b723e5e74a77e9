#include "report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <ostream>

namespace tether::sim {

void summarizeCalls(OpResult& r) {
  if (r.callUs.empty()) return;
  r.firstUs = r.callUs.front();
  if (r.callUs.size() == 1) {
    r.medianUs = r.firstUs;
    return;
  }
  std::vector<double> later(r.callUs.begin() + 1, r.callUs.end());
  std::sort(later.begin(), later.end());
  const auto index = static_cast<std::size_t>(std::ceil(0.5 * static_cast<double>(later.size())));
  r.medianUs = later[std::max<std::size_t>(index, 1) - 1];
}

std::string formatTime(double us) {
  if (us < 1000) return fmt::format("{:.1f} us", us);
  if (us < 1e6) return fmt::format("{:.2f} ms", us / 1e3);
  return fmt::format("{:.2f} s", us / 1e6);
}

std::string formatBytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) bytes /= 1024, ++u;
  return u == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.1f} {}", bytes, units[u]);
}

void printHeader(std::ostream& out) {
  out << fmt::format("{:<7} {:<10} {:<14} {:<8} {:>7} {:>14} {:>11} {:>11} {:>11} {:>11} {:>10} {:>11} {:>11}\n", "who",
                     "operation", "algorithm", "mode", "rounds", "messages", "busiest", "links/rank", "root msgs",
                     "root bytes", "root links", "first", "median");
}

void printRow(std::ostream& out, const OpResult& r) {
  out << fmt::format("{:<7} {:<10} {:<14} {:<8} {:>7} {:>14} {:>11} {:>11} {:>11} {:>11} {:>10} {:>11} {:>11}\n", r.who,
                     r.op, r.algorithm, r.mode, r.rounds, r.messages, formatBytes(static_cast<double>(r.busiestBytes)),
                     r.peakLinks, r.rootMessages, formatBytes(static_cast<double>(r.rootBytes)), r.rootLinks,
                     formatTime(r.firstUs), r.callUs.size() > 1 ? formatTime(r.medianUs) : std::string("-"));
}

void printJson(std::ostream& out, const OpResult& r) {
  nlohmann::json j = {{"who", r.who},
                      {"op", r.op},
                      {"algorithm", r.algorithm},
                      {"mode", r.mode},
                      {"bytes", r.bytes},
                      {"rounds", r.rounds},
                      {"messages", r.messages},
                      {"busiest_rank_bytes", r.busiestBytes},
                      {"most_copied_bytes", r.copiedBytes},
                      {"connections", r.connections},
                      {"peak_links_per_rank", r.peakLinks},
                      {"root_messages", r.rootMessages},
                      {"root_bytes", r.rootBytes},
                      {"root_links", r.rootLinks},
                      {"calls", r.callUs.size()},
                      {"first_us", r.firstUs},
                      {"median_us", r.medianUs},
                      {"sim_wall_s", r.wallS},
                      {"sim_events", r.events}};
  out << j.dump() << "\n";
}

}  // namespace tether::sim
