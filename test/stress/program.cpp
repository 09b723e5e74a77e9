#include "program.hpp"

#include <algorithm>
#include <random>
#include <stdexcept>

namespace tether::stress {

namespace {

std::uint64_t mix(std::uint64_t h, std::uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ULL;
  return h ^ (h >> 29);
}

// Mostly small blocks, now and then a larger one that spans many TCP segments.
std::uint32_t blockBytes(std::mt19937_64& rng) {
  auto roll = rng() % 100;
  if (roll < 3) return static_cast<std::uint32_t>(4096 + rng() % (60 * 1024));
  if (roll < 20) return static_cast<std::uint32_t>(512 + rng() % 3584);
  return static_cast<std::uint32_t>(kMinPayload + rng() % 400);
}

// Keep in step with the thresholds in makeProgram.
OpKind kindOfRoll(std::uint64_t roll) {
  if (roll < 18) return OpKind::Allgather;
  if (roll < 36) return OpKind::Alltoall;
  if (roll < 50) return OpKind::Alltoallv;
  if (roll < 60) return OpKind::Barrier;
  if (roll < 72) return OpKind::Broadcast;
  return OpKind::SendRecv;
}

}  // namespace

std::uint32_t parseKinds(const std::string& list) {
  std::uint32_t mask = 0;
  std::size_t start = 0;
  while (start <= list.size()) {
    auto comma = list.find(',', start);
    auto name = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    bool found = false;
    for (auto kind : {OpKind::Allgather, OpKind::Alltoall, OpKind::Alltoallv, OpKind::Barrier, OpKind::Broadcast,
                      OpKind::SendRecv}) {
      std::string k = toString(kind);
      if (name == k || (kind == OpKind::SendRecv && name == "sendrecv")) {
        mask |= 1u << static_cast<unsigned>(kind);
        found = true;
      }
    }
    if (!found && !name.empty()) throw std::invalid_argument("unknown operation kind '" + name + "'");
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return mask;
}

std::vector<Op> makeProgram(const ProgramConfig& c) {
  std::mt19937_64 rng(mix(mix(c.seed, 0x70726f67), c.comm));
  std::vector<Op> program;
  program.reserve(c.length);
  for (std::uint32_t i = 0; i < c.length; ++i) {
    Op op;
    op.index = i;
    auto roll = rng() % 100;
    while (c.kinds != 0 && !(c.kinds & (1u << static_cast<unsigned>(kindOfRoll(roll))))) roll = rng() % 100;
    if (roll < 18) {
      op.kind = OpKind::Allgather;
    } else if (roll < 36) {
      op.kind = OpKind::Alltoall;
    } else if (roll < 50) {
      op.kind = OpKind::Alltoallv;
    } else if (roll < 60) {
      op.kind = OpKind::Barrier;
      if (c.size > 2 && rng() % 3 == 0) {
        for (int r = 0; r < c.size; ++r) {
          if (rng() % 2) op.subset.push_back(r);
        }
        if (op.subset.empty()) op.subset.push_back(static_cast<int>(rng() % c.size));
        std::shuffle(op.subset.begin(), op.subset.end(), rng);  // any order is allowed
      }
    } else if (roll < 72) {
      op.kind = OpKind::Broadcast;
      op.root = static_cast<int>(rng() % c.size);
    } else {
      op.kind = OpKind::SendRecv;
      op.shift = c.size > 1 ? 1 + static_cast<int>(rng() % (c.size - 1)) : 0;
      op.tagBase = static_cast<int>(rng() % 4);
      op.threads = std::max(1, c.p2pThreads);
      op.messages = 1 + static_cast<int>(rng() % 4);
    }
    op.bytes = std::max<std::uint32_t>(kMinPayload, std::min(blockBytes(rng), c.maxBlock));
    program.push_back(std::move(op));
  }
  return program;
}

std::uint32_t alltoallvBytes(std::uint64_t seed, std::uint32_t comm, std::uint32_t index, int source, int destination) {
  auto h = mix(mix(mix(mix(seed, comm), index), static_cast<std::uint64_t>(source)),
               static_cast<std::uint64_t>(destination));
  if (h % 8 == 0) return 0;
  return static_cast<std::uint32_t>(kMinPayload + (h >> 8) % 700);
}

std::uint32_t p2pBytes(std::uint64_t seed, std::uint32_t comm, std::uint32_t index, int thread, int message,
                       int source) {
  auto h = mix(mix(mix(mix(mix(seed, comm ^ 0x7032), index), static_cast<std::uint64_t>(thread)),
                   static_cast<std::uint64_t>(message)),
               static_cast<std::uint64_t>(source));
  return static_cast<std::uint32_t>(kMinPayload + h % 300);
}

}  // namespace tether::stress
