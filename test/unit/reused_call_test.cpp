// ReusedCall (lib/core/reused_call.hpp): a communicator's kept Op and
// Completion are leased to one call at a time, without allocating, and taken
// again only after the last holder released them; an owner destroyed while a
// lease is out leaves the deletion to that last holder (ASan checks the
// memory in the sanitized builds). A send's or receive's kept op is restarted
// with the next call's kind, peer and tag.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <thread>

#include "core/reused_call.hpp"

using tether::ReusedCall;

TEST_CASE("a kept call is leased again only once every holder of the last lease dropped it", "[unit][core]") {
  auto kept = ReusedCall::make();
  auto first = kept->lease(7, 1, 3, false);
  REQUIRE(first);
  CHECK(first->op->coll == 1);
  CHECK(first->op->comm == 7);
  CHECK(!kept->lease(7, 2, 3, false));  // still out: the caller allocates its own
  tether::Op* const where = first->op.get();
  auto request = first->done;  // a request keeps the completion alone
  first.reset();
  CHECK(!kept->lease(7, 2, 3, false));
  request->complete(nullptr);
  std::thread([r = std::move(request)]() mutable { r.reset(); }).join();  // dropped on another thread
  auto second = kept->lease(7, 2, 4, false);
  REQUIRE(second);
  CHECK(second->op.get() == where);  // the same memory, restarted
  CHECK(second->op->coll == 2);
  CHECK(second->op->code == 4);
  CHECK(!second->done->isDone());  // the completion was reset
}

TEST_CASE("an owner gone while a lease is out: the last holder deletes the kept call", "[unit][core]") {
  auto kept = ReusedCall::make();
  auto lease = kept->lease(9, 1, 2, true);
  REQUIRE(lease);
  kept.reset();  // the communicator is destroyed first
  lease->done->complete(nullptr);
  std::thread([l = std::move(lease)]() mutable { l.reset(); }).join();
  SUCCEED("no leak, no use after free (ASan)");
}

TEST_CASE("a kept send or receive is leased again as the next call's, named for its peer and tag", "[unit][core]") {
  using Kind = tether::Op::Kind;
  auto kept = ReusedCall::make();
  auto first = kept->lease(Kind::Send, 7, 1, 2);
  REQUIRE(first);
  CHECK(first->op->kind() == Kind::Send);
  CHECK(first->op->comm == 7);
  CHECK(first->op->name() == "send to rank 1 tag 2");
  CHECK(!kept->lease(Kind::Send, 7, 3, 4));  // still out
  first->op->posted.push_back(tether::match::Key{});
  first->op->outstanding = 1;
  first->op->error = std::make_exception_ptr(std::runtime_error("the last call failed"));
  tether::Op* const where = first->op.get();
  first.reset();
  auto second = kept->lease(Kind::Recv, 7, 3, 4);
  REQUIRE(second);
  CHECK(second->op.get() == where);
  CHECK(second->op->kind() == Kind::Recv);
  CHECK(second->op->name() == "recv from rank 3 tag 4");
  CHECK(second->op->posted.empty());  // nothing of the last call is left
  CHECK(second->op->outstanding == 0);
  CHECK(!second->op->error);
  CHECK(!second->done->isDone());
}
