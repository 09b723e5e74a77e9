// tether/detail/core/sequence_guard.hpp — which collective each communicator
// of a rank is in, and the frames checked against it, written once for every
// world (lib/core's SequenceGuard is its TCP instance; the in-process testing
// world runs one per rank under its mutex):
//  * a frame arriving for a collective this rank has finished, or naming
//    another operation (or broadcast root) at a running collective's id, is a
//    Protocol error: every collective running on its communicator fails, and
//    if none runs, the next one does (admit);
//  * a frame that came first from another operation fails the collective
//    when it starts (checkStashed);
//  * a frame still waiting at a collective's id when it returned fails it
//    (end), and is dropped.
// No I/O, no locks, no clock. Header-only, C++17.
#pragma once

#include <climits>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tether/detail/core/failures.hpp"
#include "tether/detail/core/rank_names.hpp"
#include "tether/error.hpp"

namespace tether {
namespace detail {
namespace core {

// The collectives running on one communicator, by id (ascending): a sorted
// vector, so a call adds no node (one runs at a time unless nonblocking).
template <class Call>
class RunningCalls {
 public:
  using Entry = std::pair<std::uint64_t, Call*>;
  using iterator = typename std::vector<Entry>::iterator;
  using const_iterator = typename std::vector<Entry>::const_iterator;

  iterator begin() { return v_.begin(); }
  iterator end() { return v_.end(); }
  const_iterator begin() const { return v_.begin(); }
  const_iterator end() const { return v_.end(); }
  bool empty() const { return v_.empty(); }
  std::size_t size() const { return v_.size(); }

  iterator find(std::uint64_t coll) {
    auto it = lower(coll);
    return it != v_.end() && it->first == coll ? it : v_.end();
  }
  const_iterator find(std::uint64_t coll) const { return const_cast<RunningCalls*>(this)->find(coll); }
  Call*& operator[](std::uint64_t coll) {
    auto it = lower(coll);
    if (it == v_.end() || it->first != coll) it = v_.insert(it, Entry{coll, nullptr});
    return it->second;
  }
  void erase(std::uint64_t coll) {
    auto it = find(coll);
    if (it != v_.end()) v_.erase(it);
  }

 private:
  iterator lower(std::uint64_t coll) {
    // Ids grow: the newest is nearly always last.
    if (v_.empty() || v_.back().first < coll) return v_.end();
    auto it = v_.begin();
    while (it != v_.end() && it->first < coll) ++it;
    return it;
  }
  std::vector<Entry> v_;
};

// One communicator's collectives on this rank; a world's record derives from
// it. Named when made, before any thread can see it.
template <class Call>
struct Sequence {
  explicit Sequence(RankNames names) : names(std::move(names)) {}

  std::uint64_t started = 0;   // highest collective id started on this rank
  RunningCalls<Call> running;  // started and not yet ended
  std::exception_ptr poison;   // a protocol error seen while none ran
  const RankNames names;       // how its errors name ranks: this one is names.who(), names.rank()

  bool finished(std::uint64_t coll) const { return coll <= started && running.find(coll) == running.end(); }
};

// What a world tells the guard:
//  W::Call, W::Key, W::Header, W::Mailbox, W::Stashed (match::StashedFrame<Header>)
//  W::Seq          its record of a communicator, derived from Sequence<Call>
//  W::commOf(header), W::collOf(header): a collective frame's communicator and id
//  W::seqOf(call)  the call's record; W::collOf(call); W::nameOf(call): "allgather#2"
//  W::ofCall(key, call): a frame of the call's communicator and id (any source, step)
//  W::sourceOf(key): its sender as keys number it; W::describe(header)
//  W::sourceRank(seq, src), W::sourceName(seq, src): that sender's rank in
//    the communicator (Error::peer()) and its name ("rank 1 (world 2)")
//  W::foreignText(name, header, call): why a frame at the call's id is not of
//    it (failures::differentCollectives, differentRoots; `name` its sender's);
//    empty if it is
template <class W>
class SequenceGuard {
 public:
  using Call = typename W::Call;
  using Key = typename W::Key;
  using Header = typename W::Header;
  using Mailbox = typename W::Mailbox;
  using Stashed = typename W::Stashed;
  using Seq = typename W::Seq;

  // The world's side.
  class Hooks {
   public:
    // Ends `call` with `e` (its receives withdrawn, its wait ended).
    virtual void failCall(Call& call, std::exception_ptr e) = 0;
    // A frame broke a communicator's sequence (before its collectives fail).
    virtual void noticed(const Error&) {}

   protected:
    ~Hooks() = default;
  };

  explicit SequenceGuard(Hooks& hooks) : hooks_(hooks) {}
  SequenceGuard(const SequenceGuard&) = delete;
  SequenceGuard& operator=(const SequenceGuard&) = delete;

  void add(std::uint64_t comm, std::shared_ptr<Seq> seq) { comms_[comm] = std::move(seq); }
  void remove(std::uint64_t comm) { comms_.erase(comm); }
  // Null if this rank has no such communicator (any more).
  const Seq* find(std::uint64_t comm) const {
    auto it = comms_.find(comm);
    return it == comms_.end() ? nullptr : it->second.get();
  }

  // A collective frame from `src` that no receive was posted for: false if
  // it breaks its communicator's sequence (reported; the frame is dropped).
  bool admit(int src, const Header& h) {
    auto it = comms_.find(W::commOf(h));
    if (it == comms_.end()) return true;
    Seq& seq = *it->second;
    const std::uint64_t coll = W::collOf(h);
    if (seq.finished(coll)) {
      reportProtocol(seq, Error(ErrorCode::Protocol,
                                seq.names.who() + ": received " + W::describe(h) + " from " + W::sourceName(seq, src) +
                                    ", but this rank has already finished that collective (latest: #" +
                                    std::to_string(seq.started) + ")",
                                seq.names.rank(), W::sourceRank(seq, src)));
      return false;
    }
    auto run = seq.running.find(coll);
    if (run == seq.running.end()) return true;
    const std::string foreign = W::foreignText(W::sourceName(seq, src), h, *run->second);
    if (foreign.empty()) return true;
    reportProtocol(seq, Error(ErrorCode::Protocol, failures::failure(seq.names.who(), W::nameOf(*run->second), foreign),
                              seq.names.rank(), W::sourceRank(seq, src)));
    return false;
  }

  // `call` starts as collective W::collOf(call) of `seq`; false if it failed
  // at once (a protocol error broke the communicator while none ran).
  bool begin(Seq& seq, Call& call) {
    const std::uint64_t coll = W::collOf(call);
    if (coll > seq.started) seq.started = coll;
    seq.running[coll] = &call;
    if (!seq.poison) return true;
    hooks_.failCall(call, seq.poison);
    return false;
  }

  // A frame already waiting at the call's id but naming another operation
  // or root: the ranks called different collectives; fails `call`.
  void checkStashed(Call& call, const Mailbox& mailbox) {
    const Seq& seq = *W::seqOf(call);
    const Fault fault = lowestFault(mailbox, call, [&](int src, const Stashed& s) {
      return W::foreignText(W::sourceName(seq, src), s.header, call);
    });
    if (fault)
      hooks_.failCall(call, std::make_exception_ptr(Error(
                                ErrorCode::Protocol, failures::failure(seq.names.who(), W::nameOf(call), fault.what),
                                seq.names.rank(), W::sourceRank(seq, fault.source))));
  }

  // `call` ended (e: its error, or null). One that returned but left a frame
  // at its id unread gets a Protocol error in `e` (its sender ran another
  // algorithm or operation), and the call's frames are dropped.
  void end(Call& call, std::exception_ptr& e, Mailbox& mailbox) {
    Seq* seq = W::seqOf(call);
    if (!seq) return;
    leave(call);
    if (e) return;
    const Fault extra = lowestFault(mailbox, call, [&](int src, const Stashed& s) {
      return failures::neverReceives(W::sourceName(*seq, src), W::describe(s.header), W::nameOf(call));
    });
    if (!extra) return;
    mailbox.dropStashed(OfCall{call});
    e = std::make_exception_ptr(Error(ErrorCode::Protocol,
                                      failures::failure(seq->names.who(), W::nameOf(call), extra.what),
                                      seq->names.rank(), W::sourceRank(*seq, extra.source)));
  }

  // `call` leaves its sequence without a check (it never ran).
  void leave(Call& call) {
    if (Seq* seq = W::seqOf(call)) seq->running.erase(W::collOf(call));
  }

  // A frame that breaks `comm`'s sequence: every collective running on it
  // fails; if none runs, the next one will.
  void reportProtocol(std::uint64_t comm, const Error& e) {
    auto it = comms_.find(comm);
    if (it == comms_.end()) return hooks_.noticed(e);
    reportProtocol(*it->second, e);
  }

 private:
  struct OfCall {
    const Call& call;
    bool operator()(const Key& k) const { return W::ofCall(k, call); }
  };

  // What a look at the stash found: the frame's sender and the error's text
  // (nothing while the text is empty).
  struct Fault {
    int source = -1;
    std::string what;
    explicit operator bool() const { return !what.empty(); }
  };
  // Of the call's frames in the stash for which `fault(source, frame)` gives
  // a text, the one from the lowest source, so every world names the same peer.
  template <class F>
  static Fault lowestFault(const Mailbox& box, const Call& call, F fault) {
    Fault found;
    int lowest = INT_MAX;
    box.forEachStashed([&](const Key& key, const Stashed& frame) {
      if (!W::ofCall(key, call)) return;
      const int src = W::sourceOf(key);
      if (src >= lowest) return;
      std::string what = fault(src, frame);
      if (what.empty()) return;
      lowest = src;
      found = Fault{src, std::move(what)};
    });
    return found;
  }

  void reportProtocol(Seq& seq, const Error& e) {
    hooks_.noticed(e);
    if (seq.running.empty()) {
      if (!seq.poison) seq.poison = std::make_exception_ptr(e);
      return;
    }
    std::vector<Call*> calls;
    for (auto& entry : seq.running) calls.push_back(entry.second);
    for (Call* call : calls) hooks_.failCall(*call, std::make_exception_ptr(e));
  }

  Hooks& hooks_;
  std::unordered_map<std::uint64_t, std::shared_ptr<Seq>> comms_;
};

}  // namespace core
}  // namespace detail
}  // namespace tether
