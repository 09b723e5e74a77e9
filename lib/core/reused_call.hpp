// A communicator's call — a collective's, a send's or a receive's: its Op and
// Completion — kept and handed out call after call without allocating, and
// reused only when no other thread can still touch it.
//
// Each call leases the pair as two shared_ptrs (the op, and the completion
// aliasing the same owner) whose one control block lives inside this object
// (an in-place allocator: no heap). Whoever drops the last of them — the
// progress thread, a request dropped on another thread, a stall probe — ends
// the lease from the allocator's deallocate(), the control block's very last
// access, with a release; the next call takes the pair only after an acquire
// sees that. So every write the progress thread (or anyone) made to the op
// happens before its reuse: use_count() == 1, a relaxed load, gave no such
// order (TSan: op->active read by the next call's launch while the progress
// thread had written it).
//
// The communicator owns this object through Kept: destroying it while a
// lease is out hands the last release the job of deleting it.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <new>
#include <optional>
#include <utility>

#include "base/layer.hpp"
#include "core/completion.hpp"
#include "core/op.hpp"

TETHER_LAYER(6, "core");

namespace tether {

class ReusedCall {
 public:
  struct Lease {
    std::shared_ptr<Op> op;
    std::shared_ptr<Completion> done;
  };

  // A fresh object, owned by the returned handle.
  struct Orphan {
    void operator()(ReusedCall* c) const { c->orphan(); }
  };
  using Kept = std::unique_ptr<ReusedCall, Orphan>;
  static Kept make() { return Kept(new ReusedCall); }

  // The kept pair for collective `coll` of `code` (the op of communicator
  // `comm`, `child` as Op's), or nothing while an earlier lease is out (the
  // caller then allocates a pair of its own).
  std::optional<Lease> lease(std::uint64_t comm, std::uint64_t coll, std::uint32_t code, bool child) {
    if (!take()) return std::nullopt;
    if (op_)
      op_->restart(coll, code);
    else
      op_.emplace(comm, coll, code, child);
    return pair();
  }
  // The same for a send or a receive (`kind`) of communicator `comm`.
  std::optional<Lease> lease(Op::Kind kind, std::uint64_t comm, int peer, int tag) {
    if (!take()) return std::nullopt;
    if (op_)
      op_->restart(kind, peer, tag);
    else
      op_.emplace(kind, comm, peer, tag);
    return pair();
  }

 private:
  enum class State { Free, Leased, Orphaned };

  ReusedCall() = default;
  ~ReusedCall() = default;

  bool take() {
    State expected = State::Free;
    return state_.compare_exchange_strong(expected, State::Leased, std::memory_order_acquire,
                                          std::memory_order_relaxed);
  }
  Lease pair() {
    done_.reset();
    std::shared_ptr<Op> op(
        &*op_, [](Op*) {}, InPlace<Op>{this});
    std::shared_ptr<Completion> done(op, &done_);  // the same control block
    return Lease{std::move(op), std::move(done)};
  }

  // The control block's storage; deallocate() is the block's last access.
  template <class T>
  struct InPlace {
    using value_type = T;
    ReusedCall* home;
    template <class U>
    InPlace(const InPlace<U>& o) noexcept : home(o.home) {}
    explicit InPlace(ReusedCall* h) noexcept : home(h) {}
    T* allocate(std::size_t n) {
      static_assert(sizeof(T) <= kBlock && alignof(T) <= alignof(std::max_align_t), "control block fits");
      (void)n;
      return reinterpret_cast<T*>(home->block_);
    }
    void deallocate(T*, std::size_t) noexcept { home->released(); }
    template <class U>
    bool operator==(const InPlace<U>& o) const noexcept { return home == o.home; }
    template <class U>
    bool operator!=(const InPlace<U>& o) const noexcept { return home != o.home; }
  };

  // The lease ended (any thread).
  void released() noexcept {
    if (state_.exchange(State::Free, std::memory_order_acq_rel) == State::Orphaned) delete this;
  }
  // Its owner is gone: delete now, or at the lease's end.
  void orphan() noexcept {
    if (state_.exchange(State::Orphaned, std::memory_order_acq_rel) == State::Free) delete this;
  }

  static constexpr std::size_t kBlock = 64;
  std::atomic<State> state_{State::Free};
  std::optional<Op> op_;
  Completion done_;
  alignas(std::max_align_t) unsigned char block_[kBlock];
};

}  // namespace tether
