// tether/detail/core/call_table.hpp — the calls in flight on one rank and
// what their receives wait for, written once for every world: a receive is
// posted with the caller's buffer (or takes a frame that came first, from
// the stash), an arriving frame goes to the oldest receive posted under its
// full key (copied once, into that buffer) or into the stash, a call is
// settled once nothing it posted is outstanding, and a failed call withdraws
// its receives at once. No I/O, no locks, no clock: a world feeds it frames
// and failures (the TCP world from its links on the progress thread; the
// in-process testing world under its mutex) and is told, through its hooks,
// of each frame received (credit for the sender's window) and each call
// failed. Steady state allocates nothing (the mailbox keeps its queues, the
// stash's payload buffers are reused, the woken list keeps its memory).
// Header-only, C++17.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tether/detail/core/failures.hpp"
#include "tether/detail/core/window.hpp"
#include "tether/detail/match/mailbox.hpp"

namespace tether {
namespace detail {
namespace core {

// A call's run, resumed with its error (or nullptr) once the wait it began
// has ended (TCP: OpRun; the testing world's calls wait on a condition
// variable and need none).
class Resumable {
 public:
  virtual void resume(std::exception_ptr e) = 0;

 protected:
  ~Resumable() = default;
};

// What the table keeps of a call: a world's call type derives from it.
template <class Key>
struct CallState {
  int outstanding = 0;           // receives posted + (TCP) referenced sends unwritten
  std::exception_ptr error;      // first failure; ends the call
  Resumable* resumer = nullptr;  // the run waiting in settleOrResume
  std::vector<Key> posted;       // receives still in the mailbox
  bool active = false;           // registered with the table

  void clearState() {
    outstanding = 0;
    error = nullptr;
    resumer = nullptr;
    posted.clear();
    active = false;
  }
};

// Buffers for stashed payloads, kept for the next ones once a receive has
// taken the payload out: a steady state of early frames (a broadcast's, a
// gather's) allocates nothing. Buffers of at most kMaxBytes are kept, at most
// kBuffers of them and kKeptBytes in all.
class StashBuffers {
 public:
  static constexpr std::size_t kMaxBytes = 64 * 1024;
  static constexpr std::size_t kKeptBytes = 1024 * 1024;
  static constexpr std::size_t kBuffers = 256;  // so that take() looks at a few hundred at most

  // A buffer of `length` bytes: the most recently kept one large enough
  // (the frames of a run of calls have the same sizes), else a new one.
  std::vector<unsigned char> take(std::size_t length) {
    if (length == 0) return {};
    for (std::size_t i = kept_.size(); i-- > 0;) {
      if (kept_[i].capacity() < length) continue;
      std::vector<unsigned char> b = std::move(kept_[i]);
      if (i + 1 != kept_.size()) kept_[i] = std::move(kept_.back());
      kept_.pop_back();
      keptBytes_ -= b.capacity();
      b.resize(length);
      return b;
    }
    return std::vector<unsigned char>(length);
  }

  // A payload taken out of its buffer: kept for take() if there is room.
  void give(std::vector<unsigned char>&& b) {
    const std::size_t bytes = b.capacity();
    if (bytes == 0 || bytes > kMaxBytes || keptBytes_ + bytes > kKeptBytes || kept_.size() == kBuffers) return;
    b.clear();
    kept_.push_back(std::move(b));
    keptBytes_ += bytes;
  }

  std::size_t keptBytes() const { return keptBytes_; }

 private:
  std::vector<std::vector<unsigned char>> kept_;
  std::size_t keptBytes_ = 0;  // their capacities
};

// What a world tells the table (and the table tells the world).
//  W::Call     its call type, derived from CallState<W::Key>
//  W::Key      the full matching key; W::Header a frame's header
//  W::Mailbox  a match::Mailbox of match::PostedReceive and match::StashedFrame<Header>
//  W::keyOf(src, header), W::sourceOf(key), W::lengthOf(header),
//  W::stash(mailbox, key, frame) (false: a duplicate, dropped),
//  W::tagOf(key): a point-to-point key's tag, or nothing (a collective's:
//  W::stepOf(key) then names its step),
//  W::lengthMismatch(call, src, header, expected): the error of a receive
//  of `call` whose frame from `src` has another length
// (frame_calls.hpp is both worlds' W).
template <class W>
class CallTable {
 public:
  using Call = typename W::Call;
  using Key = typename W::Key;
  using Header = typename W::Header;
  using Mailbox = typename W::Mailbox;
  using Stashed = match::StashedFrame<Header>;

  // The world's side.
  class Hooks {
   public:
    // A frame from `src` was received (into a receive, or out of the stash).
    virtual void frameReceived(int src, const Header& h) = 0;
    // `call` failed: its receives are withdrawn and its wait has ended.
    virtual void failed(Call& call) = 0;

   protected:
    ~Hooks() = default;
  };

  explicit CallTable(Hooks& hooks) : hooks_(hooks) {}
  CallTable(const CallTable&) = delete;
  CallTable& operator=(const CallTable&) = delete;

  // ---- the registry ----
  void add(Call& call) {
    if (!call.active) active_.push_back(&call);
    call.active = true;
  }
  void remove(Call& call) {
    auto it = std::find(active_.begin(), active_.end(), &call);
    if (it != active_.end()) {
      *it = active_.back();
      active_.pop_back();
    }
    call.active = false;
  }
  std::vector<Call*> active() const { return active_; }
  const std::vector<Call*>& activeSet() const { return active_; }

  // ---- receiving ----
  // True if a frame already stashed under `key` completed the receive
  // (copied into `buf`); throws the length mismatch if its length differs.
  bool takeStashed(Call& call, const Key& key, void* buf, std::size_t len) {
    auto s = mailbox_.takeStashed(key);
    if (!s) return false;
    const int src = W::sourceOf(key);
    hooks_.frameReceived(src, s->header);
    if (W::lengthOf(s->header) != len) std::rethrow_exception(W::lengthMismatch(call, src, s->header, len));
    if (len) std::memcpy(buf, s->payload.data(), len);
    buffers_.give(std::move(s->payload));
    return true;
  }
  // Posts a receive of `call` under `key` into `buf`.
  void post(Call& call, const Key& key, void* buf, std::size_t len) {
    mailbox_.post(key, match::PostedReceive{buf, len, &call});
    call.posted.push_back(key);
    ++call.outstanding;
  }
  // Withdraws every receive `call` still has posted (no frame took them);
  // true if there was one. What it had outstanding for them is no more.
  bool withdraw(Call& call) {
    for (const auto& k : call.posted) mailbox_.unpost(k, &call);
    const bool any = !call.posted.empty();
    call.outstanding -= static_cast<int>(call.posted.size());
    call.posted.clear();
    return any;
  }

  struct Claim {
    Call* call;
    void* buf;
  };
  // Takes the oldest receive posted under the frame's key. Empty: there is
  // none. A null call: there was one, but the lengths differ (that call failed).
  std::optional<Claim> claim(int src, const Header& h) {
    const Key key = W::keyOf(src, h);
    auto p = mailbox_.claimPosted(key);
    if (!p) return std::nullopt;
    hooks_.frameReceived(src, h);
    Call* call = const_cast<Call*>(static_cast<const Call*>(p->owner));
    auto it = std::find(call->posted.begin(), call->posted.end(), key);
    if (it != call->posted.end()) call->posted.erase(it);
    if (p->len != W::lengthOf(h)) {
      failCall(*call, W::lengthMismatch(*call, src, h, p->len));
      return Claim{nullptr, nullptr};
    }
    return Claim{call, p->buf};
  }
  // A complete frame from `src`: to the oldest receive posted under its key,
  // else into the stash. False: a duplicate (W::stash refused it; dropped).
  bool deliver(int src, const Header& h, const unsigned char* payload) {
    return deliver(src, h, payload, [] { return true; });
  }
  // The same, asking `admit()` before the frame goes to the stash (false:
  // it broke its sequence, and is dropped).
  template <class Admit>
  bool deliver(int src, const Header& h, const unsigned char* payload, Admit admit) {
    const std::size_t length = W::lengthOf(h);
    if (auto c = claim(src, h)) {
      if (!c->call) return true;
      if (length) std::memcpy(c->buf, payload, length);
      received(*c->call);
      return true;
    }
    if (!admit()) return true;
    std::vector<unsigned char> copy = buffers_.take(length);
    if (length) std::memcpy(copy.data(), payload, length);
    return W::stash(mailbox_, W::keyOf(src, h), Stashed{h, std::move(copy)});
  }
  bool deliver(int src, const Header& h, std::vector<unsigned char>&& payload) {
    if (auto c = claim(src, h)) {  // a receive was posted while the payload was arriving
      if (!c->call) return true;
      if (W::lengthOf(h)) std::memcpy(c->buf, payload.data(), W::lengthOf(h));
      buffers_.give(std::move(payload));
      received(*c->call);
      return true;
    }
    return W::stash(mailbox_, W::keyOf(src, h), Stashed{h, std::move(payload)});
  }
  // A claimed receive's payload is in place.
  void received(Call& call) {
    if (call.error) return;
    --call.outstanding;
    wake(call);
  }
  Mailbox& mailbox() { return mailbox_; }
  const Mailbox& mailbox() const { return mailbox_; }
  // A buffer for a payload headed for the stash: one a receive has emptied, when one is kept.
  std::vector<unsigned char> stashBuffer(std::size_t length) { return buffers_.take(length); }

  // ---- waiting and ending ----
  // The world rank the call waits for: its first receive's sender, else
  // `queuedTo()` (the peer a send of it is still held or queued for; -1: none).
  template <class QueuedTo>
  static int waitsOn(const Call& call, QueuedTo queuedTo) {
    return call.posted.empty() ? queuedTo() : W::sourceOf(call.posted.front());
  }
  // The call has a receive posted from `src` (a world rank).
  static bool postedFrom(const Call& call, int src) {
    return std::any_of(call.posted.begin(), call.posted.end(), [&](const Key& k) { return W::sourceOf(k) == src; });
  }
  // What it waits for, as its Timeout says: "waiting for step 2 from rank
  // 1", "... for a message with tag 5 from rank 0"; else, for a send still
  // held for world rank `queuedTo()`, "waiting to send to rank 1" and
  // `heldNote()` (why its window holds it, window.hpp; "" if none does);
  // else "before completing". `name(worldRank)` names a rank.
  template <class Name, class QueuedTo, class HeldNote>
  static std::string pendingText(const Call& call, Name name, QueuedTo queuedTo, HeldNote heldNote) {
    if (call.posted.empty()) {
      const int to = queuedTo();
      return to < 0 ? "before completing" : window::waitingToSend(name(to)) + heldNote();
    }
    const Key& k = call.posted.front();
    const auto tag = W::tagOf(k);
    return failures::waitingFor(tag ? failures::messageWithTag(*tag) : failures::stepNumber(W::stepOf(k)),
                                name(W::sourceOf(k)));
  }
  // Nothing the call posted is outstanding (or it failed: rethrows).
  bool settled(const Call& call) const {
    if (call.error) std::rethrow_exception(call.error);
    return call.outstanding == 0;
  }
  // Waits until everything the call posted is done: true if it is (or it
  // failed: rethrows) now, else run `r` is resumed once it is.
  bool settleOrResume(Call& call, Resumable& r) {
    if (settled(call)) return true;
    call.resumer = &r;
    return false;
  }
  // Queues the call's run if its wait ended; resumeWoken resumes them (the
  // world calls it where no frame is half handled: never on a link's stack).
  void wake(Call& call) {
    if (!call.resumer || (!call.error && call.outstanding > 0)) return;
    woken_.push_back(Woken{std::exchange(call.resumer, nullptr), call.error});
  }
  void resumeWoken() {
    if (inResume_) return;  // the outer call runs what was queued meanwhile
    inResume_ = true;
    struct Done {
      bool& flag;
      ~Done() { flag = false; }
    } done{inResume_};
    while (!woken_.empty()) {
      resuming_.swap(woken_);
      for (auto& w : resuming_) w.resumer->resume(w.error);
      resuming_.clear();
    }
  }
  // Ends `call` with `e` (the first error wins): withdraws its receives and
  // wakes it; then the world's failed() hook.
  void failCall(Call& call, std::exception_ptr e) {
    if (call.error) return;
    call.error = std::move(e);
    withdraw(call);
    call.outstanding = 0;
    wake(call);
    hooks_.failed(call);
  }
  // Ends every call in flight with `errorOf(call)` (an abort: each names its call).
  template <class ErrorOf>
  void failAll(ErrorOf errorOf) {
    for (Call* call : active()) failCall(*call, std::make_exception_ptr(errorOf(*call)));
  }

 private:
  Hooks& hooks_;
  Mailbox mailbox_;
  StashBuffers buffers_;       // emptied stash payloads, for the next ones
  std::vector<Call*> active_;  // a few at a time: a vector, no node per call
  // Calls whose wait ended, with their result; resumeWoken swaps them into
  // resuming_, so neither is regrown in steady state.
  struct Woken {
    Resumable* resumer = nullptr;
    std::exception_ptr error;
  };
  std::vector<Woken> woken_, resuming_;
  bool inResume_ = false;
};

}  // namespace core
}  // namespace detail
}  // namespace tether
