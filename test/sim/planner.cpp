#include "planner.hpp"

#include <algorithm>
#include <random>
#include <set>
#include <stdexcept>

namespace tether::sim {
namespace {

// Bytes a local step copies: Copy moves `bytes`; CopyBlocks moves `count`
// blocks of `bytes` each.
std::uint64_t copiedBytes(const dc::Step& s) {
  return s.kind == dc::Step::Kind::CopyBlocks ? std::uint64_t{s.bytes} * s.count : s.bytes;
}

std::uint64_t mix(std::uint64_t x) {  // splitmix64's finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

const dc::Settings& environmentSettings() {
  static const dc::Settings s = dc::loadSettings();  // throws Error{InvalidArgument} for a bad variable
  return s;
}

}  // namespace

Planner::Planner(const CollectiveSpec& spec, int nranks, bool cpuBound)
    : spec_(spec), n_(nranks), cpuBound_(cpuBound), settings_(environmentSettings()) {
  if (spec_.treeRadix > 0) settings_.tuning.radix = spec_.treeRadix;
  const dc::Op family = dc::familyOf(spec_.op);
  if (!spec_.forced.empty() && !spec_.build && !dc::findAlgorithm(family, spec_.forced.c_str())) {
    std::string rows;
    for (const auto& a : dc::kAlgorithms)
      if (a.family == family) rows += std::string(rows.empty() ? "" : "|") + a.name;
    throw std::invalid_argument("no " + std::string(dc::opName(family)) + " algorithm '" + spec_.forced + "' (use " +
                                rows + ")");
  }
  if (spec_.op == dc::Op::Alltoall) {
    uniform_.resize(2 * static_cast<std::size_t>(n_));
    for (int j = 0; j < n_; ++j) {
      uniform_[static_cast<std::size_t>(j)] = spec_.bytes;
      uniform_[static_cast<std::size_t>(n_ + j)] = static_cast<std::size_t>(j) * spec_.bytes;
    }
  }
}

dc::Shape Planner::shapeOf(int rank) const {
  dc::Shape s = settings_.tuning;
  s.rank = rank;
  s.size = n_;
  s.cpuBound = cpuBound_;
  return s;
}

std::size_t Planner::blockBytes(int from, int to) const {
  if (spec_.bytes == 0) return 0;
  // Depends on the distance only, so the plans stay shift-symmetric.
  const auto distance = static_cast<std::uint64_t>((to - from + n_) % n_);
  return spec_.bytes / 2 + mix(spec_.seed * 1000003ull + distance) % (spec_.bytes * 3 / 2 + 1);
}

dc::Call Planner::callOf(int rank, std::vector<std::size_t>& storage) const {
  dc::Call c;
  c.op = spec_.op;
  c.bytes = spec_.bytes;
  c.root = spec_.root;
  const auto n = static_cast<std::size_t>(n_);
  if (spec_.op == dc::Op::Alltoall) {
    c.blocks = dc::Blocks{uniform_.data(), uniform_.data() + n, uniform_.data(), uniform_.data() + n};
  } else if (spec_.op == dc::Op::Alltoallv) {
    storage.assign(4 * n, 0);
    std::size_t* sendCounts = storage.data();
    std::size_t* sendDispls = sendCounts + n;
    std::size_t* recvCounts = sendDispls + n;
    std::size_t* recvDispls = recvCounts + n;
    std::size_t sent = 0, received = 0, largest = 0;
    for (int j = 0; j < n_; ++j) {
      const auto u = static_cast<std::size_t>(j);
      sendCounts[u] = blockBytes(rank, j);
      recvCounts[u] = blockBytes(j, rank);
      sendDispls[u] = sent;
      recvDispls[u] = received;
      sent += sendCounts[u];
      received += recvCounts[u];
      largest = std::max({largest, sendCounts[u], recvCounts[u]});
    }
    c.bytes = largest;
    c.blocks = dc::Blocks{sendCounts, sendDispls, recvCounts, recvDispls};
  }
  return c;
}

std::string Planner::algorithm() const {
  if (spec_.build) return spec_.buildName;
  std::vector<std::size_t> storage;
  const dc::Call c = callOf(0, storage);
  const char* forced = spec_.forced.empty() ? settings_.forcedFor(spec_.op) : spec_.forced.c_str();
  return dc::choose(shapeOf(0), c, forced)->name;
}

CompactPlan Planner::plan(int rank) const {
  dc::Plan p(rank, n_);
  if (spec_.build) {
    spec_.build(p);
  } else {
    std::vector<std::size_t> storage;
    const dc::Shape shape = shapeOf(rank);
    const dc::Call c = callOf(rank, storage);
    const char* forced = spec_.forced.empty() ? settings_.forcedFor(spec_.op) : spec_.forced.c_str();
    p = dc::record(*dc::choose(shape, c, forced), shape, c);
  }
  CompactPlan out;
  const auto& steps = p.steps();
  out.recorded = steps.size();
  for (const auto& s : steps) {
    using Kind = dc::Step::Kind;
    CStep c;
    c.peer = s.peer;
    c.step = s.step;
    c.bytes = s.bytes;
    switch (s.kind) {
      case Kind::Send:
        c.kind = CStep::Send, ++out.sends;
        break;
      case Kind::Recv:
        c.kind = CStep::Recv;
        break;
      case Kind::Settle:
        c.kind = CStep::Settle;
        break;
      case Kind::Copy:
      case Kind::CopyBlocks:  // local copies: only their bytes matter; consecutive ones merge
        out.copiedBlocks += s.kind == Kind::CopyBlocks ? s.count : 1;
        c = CStep{copiedBytes(s), -1, 0, CStep::Local};
        if (!out.steps.empty() && out.steps.back().kind == CStep::Local) {
          out.steps.back().bytes += c.bytes;
          continue;
        }
    }
    out.steps.push_back(c);
  }
  out.steps.shrink_to_fit();
  return out;
}

bool Planner::shiftSymmetric(int ranksPerHost) const {
  const int hosts = n_ / ranksPerHost;
  if (hosts < 2) return true;
  std::set<int> shifts{1, hosts / 2, hosts - 1};
  if (hosts > 2) shifts.insert(2);
  std::mt19937_64 draw(spec_.seed);
  for (int i = 0; i < 3; ++i) shifts.insert(1 + static_cast<int>(draw() % static_cast<std::uint64_t>(hosts - 1)));
  shifts.erase(0);
  for (int i = 0; i < ranksPerHost; ++i) {
    const CompactPlan base = plan(i);
    for (int k : shifts) {
      const int shift = k * ranksPerHost;
      const CompactPlan other = plan(i + shift);
      if (other.steps.size() != base.steps.size()) return false;
      for (std::size_t s = 0; s < base.steps.size(); ++s) {
        const CStep &a = base.steps[s], &b = other.steps[s];
        const bool message = a.kind == CStep::Send || a.kind == CStep::Recv;
        if (a.kind != b.kind || a.bytes != b.bytes || a.step != b.step || (message && (a.peer + shift) % n_ != b.peer))
          return false;
      }
    }
  }
  return true;
}

double Planner::estimatedWork(int ranksPerHost) const {
  std::set<int> sample;
  for (int i = 0; i < std::min(ranksPerHost, n_); ++i) sample.insert(i);
  std::mt19937_64 draw(spec_.seed + 1);
  for (int i = 0; i < 8; ++i) sample.insert(static_cast<int>(draw() % static_cast<std::uint64_t>(n_)));
  double work = 0;
  for (int r : sample) {
    const CompactPlan p = plan(r);
    work += static_cast<double>(p.recorded + p.copiedBlocks) + 5.0 * static_cast<double>(p.sends);
  }
  return work / static_cast<double>(sample.size()) * n_ * std::max(1, spec_.calls);
}

}  // namespace tether::sim
