// A tiny world for the unit tests: replays the plans of all N ranks of one
// collective call in one thread, with real bytes, and counts what they do.
// Sends are copied when posted (as the testing world does); a settle takes
// the frames its receives name once their senders have posted them, so the
// ranks advance in whatever order their plans allow.
//
// Besides moving data it checks the rules of plan.hpp and throws Broken on a
// break: a receive key (peer, step) used twice by a rank, a
// send key used twice, a length that differs between send and receive, a
// frame never received, an access outside a buffer, a copy that touches a
// buffer of a posted send or receive before the next settle, a send buffer
// changed before its settle, or ranks that all wait (deadlock).
//
// Rounds: a logical clock. A frame posted at time t arrives at t + 1; a settle
// moves its rank's clock to the latest arrival it waited for. The largest
// clock at the end is the number of message hops on the critical path.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "tether/detail/coll/plan.hpp"

// Checked without Catch2's per-assertion cost (these run millions of times);
// a break throws planreplay::Broken, which Catch2 reports with its message.
#define PLAN_CHECK(cond, msg)                        \
  do {                                               \
    if (!(cond)) {                                   \
      std::ostringstream planCheckText;              \
      planCheckText << msg;                          \
      throw planreplay::Broken(planCheckText.str()); \
    }                                                \
  } while (0)

namespace planreplay {

namespace dc = tether::detail::coll;

struct Broken : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Stats {
  std::size_t messages = 0;            // frames sent, all ranks
  long rounds = 0;                     // hops on the critical path
  std::vector<std::size_t> bytesSent;  // per rank
  std::vector<std::size_t> sends;      // per rank
  std::vector<std::size_t> copySteps;  // per rank: Copy and CopyBlocks steps
  std::vector<std::set<int>> peers;    // per rank: everyone it sends to or receives from
  std::size_t busiestBytes() const {
    return bytesSent.empty() ? 0 : *std::max_element(bytesSent.begin(), bytesSent.end());
  }
  std::size_t mostPeers() const {
    std::size_t most = 0;
    for (const auto& p : peers) most = std::max(most, p.size());
    return most;
  }
};

struct Memory {
  std::vector<unsigned char> in, out, scratch;
  std::vector<unsigned char>& of(dc::Buffer b) {
    return b == dc::Buffer::In ? in : b == dc::Buffer::Out ? out : scratch;
  }
};

class Replay {
 public:
  // plans[r] is rank r's plan; mem[r] its buffers (scratch is sized here).
  Replay(std::vector<dc::Plan>& plans, std::vector<Memory>& mem) : plans_(plans), mem_(mem) {}

  Stats run() {
    const int n = static_cast<int>(plans_.size());
    Stats st;
    st.bytesSent.assign(n, 0);
    st.sends.assign(n, 0);
    st.copySteps.assign(n, 0);
    st.peers.assign(n, {});
    std::vector<Rank> ranks(n);
    for (int r = 0; r < n; ++r) mem_[r].scratch.assign(plans_[r].scratchBytes(), 0xA5);
    for (bool moved = true; moved;) {
      moved = false;
      for (int r = 0; r < n; ++r) moved |= advance(r, ranks[r], st);
    }
    for (int r = 0; r < n; ++r) {
      PLAN_CHECK(ranks[r].pc == plans_[r].steps().size(),
                 "deadlock: rank " << r << " waits at step " << ranks[r].pc << " of " << plans_[r].steps().size());
      st.rounds = std::max(st.rounds, ranks[r].time);
    }
    PLAN_CHECK(frames_.empty(), frames_.size() << " frames never received");
    return st;
  }

 private:
  struct Frame {
    std::vector<unsigned char> data;
    long arrival;
  };
  struct Posted {
    dc::Step step;
    std::vector<unsigned char> sent;  // a send's bytes when posted
  };
  struct Rank {
    std::size_t pc = 0;
    long time = 0;
    std::vector<Posted> posted;                   // since the last settle
    std::set<std::pair<int, std::uint32_t>> got;  // (peer, step) received in this call
  };
  using Key = std::tuple<int, int, std::uint32_t>;  // from, to, step

  unsigned char* at(int r, dc::Ref ref, std::size_t bytes) {
    auto& buf = mem_[r].of(ref.buffer);
    PLAN_CHECK(ref.offset + bytes <= buf.size(), "rank " << r << " buffer " << static_cast<int>(ref.buffer)
                                                         << " offset " << ref.offset << " bytes " << bytes
                                                         << " outside its " << buf.size() << " bytes");
    return buf.data() + ref.offset;
  }

  static bool overlaps(dc::Ref a, std::size_t an, dc::Ref b, std::size_t bn) {
    return an && bn && a.buffer == b.buffer && a.offset < b.offset + bn && b.offset < a.offset + an;
  }

  // Runs rank r's steps until one must wait; true if any ran.
  bool advance(int r, Rank& rk, Stats& st) {
    const auto& steps = plans_[r].steps();
    const int n = static_cast<int>(plans_.size());
    bool moved = false;
    while (rk.pc < steps.size()) {
      const dc::Step& s = steps[rk.pc];
      switch (s.kind) {
        case dc::Step::Kind::Send: {
          PLAN_CHECK(s.peer >= 0 && s.peer < n && s.peer != r, "rank " << r << " sends to " << s.peer);
          const Key key{r, s.peer, s.step};
          PLAN_CHECK(frames_.count(key) == 0 && delivered_.count(key) == 0,
                     "rank " << r << " sends to " << s.peer << " step " << s.step << " twice");
          const unsigned char* p = at(r, s.at, s.bytes);
          Posted post{s, std::vector<unsigned char>(p, p + s.bytes)};
          frames_[key] = Frame{post.sent, rk.time + 1};
          rk.posted.push_back(std::move(post));
          ++st.messages;
          ++st.sends[r];
          st.bytesSent[r] += s.bytes;
          st.peers[r].insert(s.peer);
          break;
        }
        case dc::Step::Kind::Recv: {
          PLAN_CHECK(s.peer >= 0 && s.peer < n && s.peer != r, "rank " << r << " receives from " << s.peer);
          PLAN_CHECK(rk.got.insert({s.peer, s.step}).second,
                     "rank " << r << " receives from " << s.peer << " step " << s.step << " twice in one call");
          at(r, s.at, s.bytes);
          for (const auto& q : rk.posted)
            PLAN_CHECK(!overlaps(s.at, s.bytes, q.step.at, q.step.bytes),
                       "rank " << r << " step " << rk.pc << ": receive overlaps a posted buffer");
          rk.posted.push_back(Posted{s, {}});
          st.peers[r].insert(s.peer);
          break;
        }
        case dc::Step::Kind::Copy:
        case dc::Step::Kind::CopyBlocks: {
          const bool blocks = s.kind == dc::Step::Kind::CopyBlocks;
          PLAN_CHECK(!blocks || s.count >= 2, "rank " << r << " step " << rk.pc << ": CopyBlocks of " << s.count);
          for (std::size_t j = 0; j < (blocks ? s.count : 1); ++j) {
            const auto jj = static_cast<std::ptrdiff_t>(j);
            dc::Ref to = s.at, from = s.from;  // a negative offset wraps and fails the bounds check
            to.offset = static_cast<std::size_t>(static_cast<std::ptrdiff_t>(to.offset) + jj * s.toStride);
            from.offset = static_cast<std::size_t>(static_cast<std::ptrdiff_t>(from.offset) + jj * s.fromStride);
            for (const auto& q : rk.posted) {
              const bool isRecv = q.step.kind == dc::Step::Kind::Recv;
              PLAN_CHECK(!overlaps(to, s.bytes, q.step.at, q.step.bytes) &&
                             !(isRecv && overlaps(from, s.bytes, q.step.at, q.step.bytes)),
                         "rank " << r << " step " << rk.pc << ": copy touches a buffer posted to " << q.step.peer
                                 << " step " << q.step.step << " before the settle");
            }
            unsigned char* dst = at(r, to, s.bytes);
            std::memmove(dst, at(r, from, s.bytes), s.bytes);
          }
          ++st.copySteps[r];
          break;
        }
        case dc::Step::Kind::Settle: {
          for (const auto& q : rk.posted)
            if (q.step.kind == dc::Step::Kind::Recv && !frames_.count(Key{q.step.peer, r, q.step.step})) return moved;
          for (const auto& q : rk.posted) {
            if (q.step.kind == dc::Step::Kind::Send) {
              const unsigned char* now = at(r, q.step.at, q.step.bytes);
              PLAN_CHECK(q.step.bytes == 0 || std::memcmp(now, q.sent.data(), q.step.bytes) == 0,
                         "rank " << r << ": send buffer to " << q.step.peer << " step " << q.step.step
                                 << " changed before its settle");
              continue;
            }
            const Key key{q.step.peer, r, q.step.step};
            Frame f = std::move(frames_[key]);
            frames_.erase(key);
            delivered_.insert(key);
            PLAN_CHECK(f.data.size() == q.step.bytes, "rank " << r << " expects " << q.step.bytes << " B from "
                                                              << q.step.peer << " step " << q.step.step
                                                              << ", frame has " << f.data.size());
            if (!f.data.empty()) std::memcpy(at(r, q.step.at, q.step.bytes), f.data.data(), f.data.size());
            rk.time = std::max(rk.time, f.arrival);
          }
          rk.posted.clear();
          break;
        }
      }
      ++rk.pc;
      moved = true;
    }
    return moved;
  }

  std::vector<dc::Plan>& plans_;
  std::vector<Memory>& mem_;
  std::map<Key, Frame> frames_;  // posted, not yet received
  std::set<Key> delivered_;
};

}  // namespace planreplay
