// The sequence guard without sockets: frames checked against the collective
// each communicator is in (a finished one, another operation at the same id,
// a stashed frame checked when its collective starts, one left over).
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "core/sequence_guard.hpp"

using namespace tether;

namespace {

constexpr std::uint64_t kComm = 0x5eed;
constexpr auto kAllgather = static_cast<std::uint32_t>(wire::OpCode::Allgather);
constexpr auto kBarrier = static_cast<std::uint32_t>(wire::OpCode::Barrier);

// Records the failures the guard reports, as the operation table would.
struct Failures final : OpFailer {
  std::vector<std::pair<Op*, std::string>> seen;
  void failOp(Op& op, std::exception_ptr e) override {
    op.error = e;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      seen.emplace_back(&op, x.what());
    }
  }
};

wire::FrameHeader frame(std::uint64_t coll, std::uint32_t code, std::uint32_t step = 0) {
  wire::FrameHeader h;
  h.kind = wire::Kind::Collective;
  h.comm = kComm;
  h.coll = coll;
  h.step = step;
  h.tag = wire::collectiveTag(code, 0);
  h.length = 4;
  return h;
}

std::shared_ptr<Op> collective(const std::shared_ptr<CollectiveSeq>& seq, std::uint64_t coll, std::uint32_t code) {
  auto op = std::make_shared<Op>(kComm, coll, code, false);
  op->seq = seq;
  op->names = std::make_shared<const detail::core::RankNames>(seq->names);
  return op;
}

// A guard on rank 0 that knows one communicator, kComm.
struct Guarded {
  Failures failures;
  SequenceGuard guard{0, failures};
  std::shared_ptr<CollectiveSeq> seq = std::make_shared<CollectiveSeq>(detail::core::RankNames(0));
  match::Mailbox mailbox;
  Guarded() { guard.add(kComm, seq); }
};

}  // namespace

TEST_CASE_METHOD(Guarded, "A frame for a collective this rank has finished poisons the communicator's next collective",
                 "[unit][core]") {
  auto first = collective(seq, 1, kAllgather);
  REQUIRE(guard.begin(*seq, *first));
  std::exception_ptr none;
  guard.end(*first, none, mailbox);
  REQUIRE_FALSE(none);

  CHECK_FALSE(guard.admit(3, frame(1, kAllgather)));
  CHECK(failures.seen.empty());  // nothing runs: the next collective fails
  auto next = collective(seq, 2, kAllgather);
  CHECK_FALSE(guard.begin(*seq, *next));
  REQUIRE(failures.seen.size() == 1);
  CHECK(failures.seen[0].first == next.get());
  CHECK_THAT(failures.seen[0].second, Catch::Contains("from rank 3, but this rank has already finished that "
                                                      "collective (latest: #1)"));
}

TEST_CASE_METHOD(Guarded, "A frame naming another operation at a running collective id fails that collective",
                 "[unit][core]") {
  auto op = collective(seq, 4, kAllgather);
  REQUIRE(guard.begin(*seq, *op));
  CHECK(guard.admit(2, frame(4, kAllgather)));  // its own operation: fine
  CHECK(guard.admit(2, frame(5, kBarrier)));    // a later collective: stashed until it starts
  CHECK_FALSE(guard.admit(2, frame(4, kBarrier)));
  REQUIRE(failures.seen.size() == 1);
  CHECK(failures.seen[0].first == op.get());
  CHECK_THAT(failures.seen[0].second,
             Catch::Contains("allgather#4: rank 2 is in") && Catch::Contains("the ranks called different collectives"));
}

TEST_CASE("A stashed frame of another operation is found when its collective starts", "[unit][core]") {
  Failures failures;
  SequenceGuard guard(1, failures);
  auto seq = std::make_shared<CollectiveSeq>(detail::core::RankNames(1));
  guard.add(kComm, seq);
  match::Mailbox mailbox;
  const auto h = frame(7, kBarrier);
  REQUIRE(guard.admit(0, h));
  REQUIRE(mailbox.stash(match::keyOf(0, h), match::Stashed{h, std::vector<unsigned char>(4)}));

  auto same = collective(seq, 6, kAllgather);  // another id: not concerned
  REQUIRE(guard.begin(*seq, *same));
  guard.checkStashed(*same, mailbox);
  CHECK(failures.seen.empty());

  auto op = collective(seq, 7, kAllgather);
  REQUIRE(guard.begin(*seq, *op));
  guard.checkStashed(*op, mailbox);
  REQUIRE(failures.seen.size() == 1);
  CHECK(failures.seen[0].first == op.get());
  CHECK_THAT(failures.seen[0].second, Catch::Contains("rank 1: allgather#7: rank 0 is in") &&
                                          Catch::Contains("the ranks called different collectives"));
}

TEST_CASE_METHOD(Guarded, "A frame left over when a collective returns makes it fail and is dropped", "[unit][core]") {
  auto op = collective(seq, 3, kAllgather);
  REQUIRE(guard.begin(*seq, *op));
  const auto h = frame(3, kAllgather, 9);
  REQUIRE(mailbox.stash(match::keyOf(5, h), match::Stashed{h, std::vector<unsigned char>(4)}));
  std::exception_ptr e;
  guard.end(*op, e, mailbox);
  REQUIRE(e);
  CHECK_THROWS_WITH(std::rethrow_exception(e),
                    Catch::Contains("rank 5 sent") && Catch::Contains("which this rank's allgather#3 never receives"));
  CHECK(seq->failedColl == 3);
  CHECK(seq->failedPeer == 5);
  CHECK(seq->running.empty());
  CHECK_FALSE(mailbox.takeStashed(match::keyOf(5, h)));
}

TEST_CASE("A frame for a communicator this rank does not know is let through", "[unit][core]") {
  Failures failures;
  SequenceGuard guard(0, failures);
  CHECK(guard.admit(1, frame(1, kAllgather)));
  CHECK(guard.find(kComm) == nullptr);
  auto seq = std::make_shared<CollectiveSeq>(detail::core::RankNames(0));
  guard.add(kComm, seq);
  CHECK(guard.find(kComm) == seq.get());
  guard.remove(kComm);
  CHECK(guard.find(kComm) == nullptr);
}

TEST_CASE("A failed collective on a child communicator records its peer as a world rank, an abort's as it came",
          "[unit][core]") {
  // The stall probe follows world ranks (seq.failedPeer). A timeout names the
  // child's rank, turned back into its world rank; an abort is the world's
  // and already names its origin by world rank (on 37452ca it was turned
  // again: world rank 2 read as child rank 2, world rank 5).
  Failures failures;
  SequenceGuard guard{1, failures};
  auto seq = std::make_shared<CollectiveSeq>(detail::core::RankNames(0, {1, 3, 5}));
  guard.add(kComm, seq);
  match::Mailbox mailbox;
  auto ends = [&](std::uint64_t coll, Error err) {
    auto op = collective(seq, coll, kAllgather);
    REQUIRE(guard.begin(*seq, *op));
    std::exception_ptr e = std::make_exception_ptr(err);
    guard.end(*op, e, mailbox);
    CHECK(seq->failedColl == coll);
    return seq->failedPeer;
  };
  CHECK(ends(1, Error(ErrorCode::Timeout, "timed out waiting for rank 2 (world 5)", 0, 2)) == 5);
  CHECK(ends(2, Error(ErrorCode::Aborted, "aborted by rank 2", 0, 2)) == 2);
}
