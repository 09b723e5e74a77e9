// tether/detail/coll/plan.hpp — the collective seam.
//
// A collective algorithm is a plain function that records, for one rank, what
// it posts and when it waits: send to a peer, receive from a peer, copy
// locally, settle (wait for everything posted since the last settle). The
// recording — a Plan — is replayed by whichever world runs the call: the TCP
// world (lib/core/collective_run.cpp, over one stream per peer), the header-only
// in-process testing world (tether/testing/), and the simulator
// (test/sim/). So one algorithm source serves all three.
//
// Buffers are named, not pointed to: In (the caller's send data), Out (the
// caller's receive data; the same memory as In for in-place calls) and
// Scratch (owned by the call). Each world resolves names to memory; the
// simulator resolves them to nothing and counts bytes.
//
// Rules an algorithm follows: every receive names the peer and a step number
// that, with the call's collective id, is unique among the frames that peer
// sends it in this call (the full-key rule of docs/design.md); buffers of a
// posted send or receive are not touched again before the next settle().
// Header-only, C++17.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace tether {
namespace detail {
namespace coll {

enum class Buffer : std::uint8_t { In, Out, Scratch };

struct Ref {
  Buffer buffer = Buffer::Out;
  std::size_t offset = 0;
  Ref operator+(std::size_t more) const { return Ref{buffer, offset + more}; }
};

inline Ref in(std::size_t offset = 0) { return Ref{Buffer::In, offset}; }
inline Ref out(std::size_t offset = 0) { return Ref{Buffer::Out, offset}; }

struct Step {
  // CopyBlocks: `count` copies of `bytes`, the j-th from from + j * fromStride
  // to at + j * toStride, in order (a transpose or a strided pack in one step).
  enum class Kind : std::uint8_t { Send, Recv, Copy, Settle, CopyBlocks };
  Kind kind = Kind::Settle;
  int peer = -1;                                // Send/Recv: rank in the communicator
  std::uint32_t step = 0;                       // Send/Recv: the frame's step number
  Ref at;                                       // Send: source; Recv and Copy(Blocks): destination
  Ref from;                                     // Copy(Blocks): source
  std::size_t bytes = 0;                        // CopyBlocks: of each block
  std::size_t count = 0;                        // CopyBlocks: blocks
  std::ptrdiff_t toStride = 0, fromStride = 0;  // CopyBlocks: may be negative
};

class Plan {
 public:
  Plan(int rank, int size) : rank_(rank), size_(size) {}

  int rank() const { return rank_; }
  int size() const { return size_; }

  void send(int peer, std::uint32_t step, Ref from, std::size_t bytes) {
    push(Step::Kind::Send, peer, step, from, Ref{}, bytes);
  }
  void recv(int peer, std::uint32_t step, Ref into, std::size_t bytes) {
    push(Step::Kind::Recv, peer, step, into, Ref{}, bytes);
  }
  // Local copy (memmove semantics); runs in order, after the preceding settle.
  void copy(Ref to, Ref from, std::size_t bytes) {
    if (bytes) push(Step::Kind::Copy, -1, 0, to, from, bytes);
  }
  // `count` local copies of `bytes` (memmove each, in order): the j-th from
  // from + j * fromStride to to + j * toStride.
  void copyBlocks(Ref to, std::ptrdiff_t toStride, Ref from, std::ptrdiff_t fromStride, std::size_t bytes,
                  std::size_t count) {
    if (count == 1) copy(to, from, bytes);
    if (count < 2 || bytes == 0) return;
    push(Step::Kind::CopyBlocks, -1, 0, to, from, bytes);
    steps_.back().count = count;
    steps_.back().toStride = toStride;
    steps_.back().fromStride = fromStride;
  }
  void settle() {
    if (!steps_.empty() && steps_.back().kind != Step::Kind::Settle) push(Step::Kind::Settle, -1, 0, Ref{}, Ref{}, 0);
  }
  // `bytes` of call-owned memory, valid for the whole call.
  Ref scratch(std::size_t bytes) {
    Ref r{Buffer::Scratch, scratchBytes_};
    scratchBytes_ += bytes;
    return r;
  }

  // Ends with a settle (added here if the algorithm did not).
  const std::vector<Step>& steps() {
    settle();
    return steps_;
  }
  std::size_t scratchBytes() const { return scratchBytes_; }

 private:
  void push(Step::Kind kind, int peer, std::uint32_t step, Ref at, Ref from, std::size_t bytes) {
    Step s;
    s.kind = kind;
    s.peer = peer;
    s.step = step;
    s.at = at;
    s.from = from;
    s.bytes = bytes;
    steps_.push_back(s);
  }

  int rank_;
  int size_;
  std::vector<Step> steps_;
  std::size_t scratchBytes_ = 0;
};

// Where a world's replay finds the named buffers.
struct Memory {
  const unsigned char* in = nullptr;
  unsigned char* out = nullptr;
  unsigned char* scratch = nullptr;

  unsigned char* at(Ref r) const {
    switch (r.buffer) {
      case Buffer::In:
        return const_cast<unsigned char*>(in) + r.offset;
      case Buffer::Out:
        return out + r.offset;
      case Buffer::Scratch:
        return scratch + r.offset;
    }
    return nullptr;
  }

  // Runs a Copy or CopyBlocks step.
  void copy(const Step& s) const {
    if (s.kind == Step::Kind::Copy) {
      std::memmove(at(s.at), at(s.from), s.bytes);
      return;
    }
    unsigned char* to = at(s.at);
    const unsigned char* from = at(s.from);
    for (std::size_t j = 0; j < s.count; ++j) {
      const auto jj = static_cast<std::ptrdiff_t>(j);
      std::memmove(to + jj * s.toStride, from + jj * s.fromStride, s.bytes);
    }
  }
};

}  // namespace coll
}  // namespace detail
}  // namespace tether
