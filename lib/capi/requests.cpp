// C ABI: nonblocking calls (tether_request_t) and the UCC-style OOB allgather.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "capi/guard.hpp"
#include "tether/bootstrap.hpp"
#include "tether/detail/args.hpp"
#include "tether/tether.h"

// The same definition as in comm.cpp.
struct tether_comm {
  std::shared_ptr<tether::Bootstrap> boot;
};

struct tether_request {
  std::shared_ptr<tether::Bootstrap> boot;  // keeps the communicator alive
  tether::Request req;
};

namespace {

using namespace tether::capi;

tether::Bootstrap& boot(tether_comm_t* comm, const char* function) { return *require(comm, function, "comm")->boot; }

template <class Start>
tether_result_t start(tether_comm_t* comm, tether_request_t** req, const char* function, Start&& s) {
  if (req) *req = nullptr;
  return guarded(function, [&] {
    auto& b = boot(comm, function);
    require(req, function, "req");
    auto out = std::make_unique<tether_request>();
    out->boot = comm->boot;
    out->req = s(b);
    *req = out.release();
  });
}

}  // namespace

extern "C" {

tether_result_t tether_iallgather(tether_comm_t* comm, void* all_data, size_t bytes_per_rank, tether_request_t** req) {
  return start(comm, req, "tether_iallgather",
               [&](tether::Bootstrap& b) { return b.iallgather(all_data, bytes_per_rank); });
}

tether_result_t tether_ialltoall(tether_comm_t* comm, const void* send_data, void* recv_data, size_t bytes_per_rank,
                                 tether_request_t** req) {
  return start(comm, req, "tether_ialltoall",
               [&](tether::Bootstrap& b) { return b.ialltoall(send_data, recv_data, bytes_per_rank); });
}

tether_result_t tether_ibarrier(tether_comm_t* comm, tether_request_t** req) {
  return start(comm, req, "tether_ibarrier", [&](tether::Bootstrap& b) { return b.ibarrier(); });
}

tether_result_t tether_isend(tether_comm_t* comm, const void* data, size_t bytes, int peer, int tag,
                             tether_request_t** req) {
  return start(comm, req, "tether_isend", [&](tether::Bootstrap& b) { return b.isend(data, bytes, peer, tag); });
}

tether_result_t tether_irecv(tether_comm_t* comm, void* data, size_t bytes, int peer, int tag, tether_request_t** req) {
  return start(comm, req, "tether_irecv", [&](tether::Bootstrap& b) { return b.irecv(data, bytes, peer, tag); });
}

tether_result_t tether_test(tether_request_t* req, int* done) {
  return guarded("tether_test", [&] {
    require(req, "tether_test", "req");
    int& out = *require(done, "tether_test", "done");
    out = 0;
    try {
      out = req->req.test() ? 1 : 0;
    } catch (...) {
      out = 1;  // a call that failed is done: the result is its error
      throw;
    }
  });
}

tether_result_t tether_wait(tether_request_t* req, int64_t timeout_ms) {
  return guarded("tether_wait", [&] {
    require(req, "tether_wait", "req");
    if (timeout_ms < 0) invalid("tether_wait: timeout_ms " + std::to_string(timeout_ms) + " is negative");
    req->req.wait(std::chrono::milliseconds(timeout_ms));
  });
}

tether_result_t tether_cancel(tether_request_t* req, int* cancelled) {
  return guarded("tether_cancel", [&] {
    require(req, "tether_cancel", "req");
    const bool c = req->req.cancel();
    if (cancelled) *cancelled = c ? 1 : 0;
  });
}

tether_result_t tether_request_free(tether_request_t* req) {
  return guarded("tether_request_free", [&] { delete req; });
}

// UCC's status for a failed call (tether.h's TETHER_OOB_ERR_*).
static int oobStatus(tether_result_t result) {
  switch (result) {
    case TETHER_SUCCESS:
      return 0;
    case TETHER_ERR_TIMEOUT:
      return TETHER_OOB_ERR_TIMED_OUT;
    case TETHER_ERR_PEER_LOST:
      return TETHER_OOB_ERR_IO_ERROR;
    case TETHER_ERR_INVALID_ARGUMENT:
      return TETHER_OOB_ERR_INVALID_PARAM;
    case TETHER_ERR_SYSTEM:
      return TETHER_OOB_ERR_NO_RESOURCE;
    default:
      return TETHER_OOB_ERR_NO_MESSAGE;
  }
}

int tether_oob_allgather(void* sbuf, void* rbuf, size_t msglen, void* coll_info, void** req) {
  if (req) *req = nullptr;
  tether_request_t* r = nullptr;
  tether_result_t res = guarded("tether_oob_allgather", [&] {
    auto* comm = static_cast<tether_comm_t*>(require(coll_info, "tether_oob_allgather", "coll_info"));
    auto& b = boot(comm, "tether_oob_allgather");
    require(req, "tether_oob_allgather", "req");
    if (msglen && (!sbuf || !rbuf))
      invalid("rank " + std::to_string(b.rank()) + ": tether_oob_allgather: sbuf or rbuf is NULL");
    tether::detail::args::allgather(b.rank(), b.size(), "tether_oob_allgather", rbuf, msglen);
    auto* mine = static_cast<unsigned char*>(rbuf) + static_cast<size_t>(b.rank()) * msglen;
    if (msglen && mine != sbuf) std::memmove(mine, sbuf, msglen);
    auto out = std::make_unique<tether_request>();
    out->boot = comm->boot;
    out->req = b.iallgather(rbuf, msglen);
    r = out.release();
  });
  if (res != TETHER_SUCCESS) return oobStatus(res);
  *req = r;
  return 0;
}

int tether_oob_req_test(void* req) {
  int done = 0;
  tether_result_t res = tether_test(static_cast<tether_request_t*>(req), &done);
  if (res != TETHER_SUCCESS) return oobStatus(res);
  return done ? 0 : TETHER_IN_PROGRESS;
}

int tether_oob_req_free(void* req) { return oobStatus(tether_request_free(static_cast<tether_request_t*>(req))); }

}  // extern "C"
