// The C ABI on forked ranks: each rank runs a body written in C11
// (capi_ranks.c, capi_errors.c) against include/tether/tether.h.
#include <catch2/catch.hpp>

#include <cstring>
#include <new>
#include <stdexcept>

#include "capi/guard.hpp"
#include "tether/unique_id.hpp"
#include "capi_ranks.h"
#include "multiproc.hpp"

namespace {

using CBody = int (*)(int, int, const tether_unique_id_t*, char*, size_t);

void runC(int nranks, CBody body) {
  auto results = tether::test::runRanks(nranks, [body, nranks](int rank, const tether::UniqueId& id) {
    tether_unique_id_t cid;
    std::memcpy(cid.bytes, id.bytes.data(), sizeof cid.bytes);
    char err[2048] = "";
    if (body(rank, nranks, &cid, err, sizeof err) != 0) throw std::runtime_error(err);
  });
  INFO(tether::test::summary(results));
  CHECK(tether::test::allOk(results));
}

}  // namespace

TEST_CASE("tether_init, rank queries and every collective work from C on 4 ranks", "[capi]") {
  runC(4, capi_collectives);
}

TEST_CASE("tether_split from C makes children that outlive their parent, and subset barriers work", "[capi]") {
  runC(5, capi_split);
}

TEST_CASE("tether_init_from_env joins from TETHER_UID, TETHER_RANK and TETHER_NRANKS", "[capi]") {
  runC(3, capi_from_env);
}

TEST_CASE("C calls without peers report bad ids, NULL handles and bad ranks with a message", "[capi]") {
  char err[2048] = "";
  INFO(err);
  CHECK(capi_local(err, sizeof err) == 0);
}

TEST_CASE("NULL buffers, bad peers and bad tags from C are TETHER_ERR_INVALID_ARGUMENT naming rank and operation",
          "[capi]") {
  runC(3, capi_bad_arguments);
}

TEST_CASE("init timings and counters from C: struct_size, phases in order, one message counted on both sides",
          "[capi]") {
  runC(3, capi_observe);
}

TEST_CASE("a C receive that nobody answers fails with TETHER_ERR_TIMEOUT at its deadline", "[capi]") {
  runC(2, capi_timeout);
}

TEST_CASE("tether_abort from C ends the other ranks' barrier with TETHER_ERR_ABORTED naming the origin", "[capi]") {
  runC(3, capi_abort);
}

TEST_CASE("any exception inside a C call becomes a result code and a message, out of memory included", "[capi]") {
  using tether::capi::guarded;
  CHECK(guarded("tether_x", [] { throw std::bad_alloc(); }) == TETHER_ERR_SYSTEM);
  CHECK(std::string(tether_last_error()) == "tether_x: out of memory");
  CHECK(guarded("tether_x", [] { throw tether::Error(tether::ErrorCode::PeerLost, "rank 1: recv: lost rank 2"); }) ==
        TETHER_ERR_PEER_LOST);
  CHECK(std::string(tether_last_error()) == "rank 1: recv: lost rank 2");
  CHECK(guarded("tether_x", [] { throw std::out_of_range("vector"); }) == TETHER_ERR_SYSTEM);
  CHECK(std::string(tether_last_error()) == "tether_x: unexpected exception: vector");
  CHECK(guarded("tether_x", [] { throw 42; }) == TETHER_ERR_SYSTEM);
  CHECK(std::string(tether_last_error()) == "tether_x: unexpected exception");
  CHECK(guarded("tether_x", [] {}) == TETHER_SUCCESS);
  CHECK(std::string(tether_last_error()) == "tether_x: unexpected exception");  // left alone
}

TEST_CASE("a tether::Error thrown inside libtether.so is caught by its type in the program (one typeinfo)",
          "[capi]") {
  // This test links the shared library, which exports only tether's API
  // (lib/tether.map): the exception's typeinfo must still be the program's.
  bool caught = false;
  try {
    tether::UniqueId::fromString("not an id");
  } catch (const tether::Error& e) {
    caught = e.code() == tether::ErrorCode::InvalidArgument;
  } catch (...) {
  }
  CHECK(caught);
}

TEST_CASE("nonblocking calls and the UCC OOB allgather from C: start, poll test until done, free", "[capi]") {
  runC(4, capi_nonblocking);
}
