/* capi_nonblocking.c — nonblocking calls and the UCC OOB trio from C11. */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <string.h>
#include <time.h>

#include "capi_check.h"
#include "capi_ranks.h"

enum { kMax = 16 };

/* ucc_oob_snippet.c (docs/integration.md) */
struct oob_coll {
  int (*allgather)(void* sbuf, void* rbuf, size_t msglen, void* coll_info, void** req);
  int (*req_test)(void* req);
  int (*req_free)(void* req);
  void* coll_info;
  uint32_t n_oob_eps;
  uint32_t oob_ep;
};
void fill_oob(struct oob_coll* oob, tether_comm_t* comm);

static void pause_1ms(void) {
  struct timespec ts = {0, 1000000};
  nanosleep(&ts, NULL);
}

int capi_nonblocking(int rank, int nranks, const tether_unique_id_t* id, char* err, size_t errlen) {
  EXPECT(nranks <= kMax, "at most %d ranks", kMax);
  tether_options_t options;
  tether_options_init(&options);
  options.timeout_ms = 30000;
  tether_comm_t* comm = NULL;
  OK(tether_init(rank, nranks, id, &options, &comm));

  /* UCC's OOB allgather, exactly as UCC calls it: start, poll req_test, free. */
  uint64_t mine = 0xabc000u + (uint64_t)rank;
  uint64_t all[kMax];
  memset(all, 0, sizeof all);
  struct oob_coll coll;
  fill_oob(&coll, comm);
  EXPECT(coll.oob_ep == (uint32_t)rank && coll.n_oob_eps == (uint32_t)nranks, "oob endpoints");
  void* oob = NULL;
  EXPECT(coll.allgather(&mine, all, sizeof mine, coll.coll_info, &oob) == 0, "oob allgather: %s", tether_last_error());
  int st;
  int polls = 0;
  while ((st = coll.req_test(oob)) == TETHER_IN_PROGRESS) {
    ++polls;
    EXPECT(polls < 20000, "oob allgather still in progress after 20000 polls");
    pause_1ms();
  }
  EXPECT(st == 0, "oob req_test returned %d: %s", st, tether_last_error());
  EXPECT(coll.req_free(oob) == 0, "oob req_free");
  for (int i = 0; i < nranks; ++i)
    EXPECT(all[i] == 0xabc000u + (uint64_t)i, "oob block %d is %llx", i, (unsigned long long)all[i]);
  /* A bad coll_info is a negative status, never a crash. */
  void* none = NULL;
  int bad = tether_oob_allgather(&mine, all, sizeof mine, NULL, &none);
  EXPECT(bad == TETHER_OOB_ERR_INVALID_PARAM && none == NULL, "NULL coll_info: %d, not UCC_ERR_INVALID_PARAM (-3)",
         bad);

  /* An irecv pending while an ibarrier and an ialltoall run. */
  int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  int got = -1;
  tether_request_t* rr = NULL;
  tether_request_t* bar = NULL;
  tether_request_t* a2a = NULL;
  OK(tether_irecv(comm, &got, sizeof got, prev, 11, &rr));
  OK(tether_ibarrier(comm, &bar));
  int in[kMax], out[kMax];
  for (int i = 0; i < nranks; ++i) in[i] = rank * 100 + i;
  OK(tether_ialltoall(comm, in, out, sizeof(int), &a2a));
  int done = 0;
  polls = 0;
  while (!done) {
    OK(tether_test(a2a, &done));
    EXPECT(++polls < 20000, "ialltoall not done after 20000 polls");
    if (!done) pause_1ms();
  }
  OK(tether_wait(bar, 0));
  for (int i = 0; i < nranks; ++i) EXPECT(out[i] == i * 100 + rank, "alltoall block %d", i);
  int v = 500 + rank;
  tether_request_t* sr = NULL;
  OK(tether_isend(comm, &v, sizeof v, next, 11, &sr));
  OK(tether_wait(sr, 0));
  OK(tether_wait(rr, 0));
  EXPECT(got == 500 + prev, "irecv payload %d", got);
  OK(tether_request_free(sr));
  OK(tether_request_free(rr));
  OK(tether_request_free(bar));
  OK(tether_request_free(a2a));

  /* Cancel of an unmatched irecv: withdrawn, TETHER_ERR_ABORTED naming it. */
  int lost = 0, cancelled = 0;
  tether_request_t* cr = NULL;
  OK(tether_irecv(comm, &lost, sizeof lost, prev, 12, &cr));
  OK(tether_cancel(cr, &cancelled));
  EXPECT(cancelled == 1, "irecv not cancelled");
  /* a failed call is done: tether_test says so together with its error */
  done = 0;
  FAILS(tether_test(cr, &done), TETHER_ERR_ABORTED, "cancelled");
  EXPECT(done == 1, "tether_test after a cancelled irecv: done=%d with its error", done);
  FAILS(tether_wait(cr, 0), TETHER_ERR_ABORTED, "cancelled");
  OK(tether_request_free(cr));
  FAILS(tether_ibarrier(comm, NULL), TETHER_ERR_INVALID_ARGUMENT, "req is NULL");

  /* A failed OOB allgather (rank 0 alone on a child, cancelled: TETHER_ERR_ABORTED)
   * is UCC's UCC_ERR_NO_MESSAGE (-6), not -TETHER_ERR_ABORTED (-2, UCC's NOT_IMPLEMENTED). */
  tether_comm_t* child = NULL;
  OK(tether_split(comm, 0, rank, &child));
  if (rank == 0) {
    void* lone = NULL;
    EXPECT(tether_oob_allgather(&mine, all, sizeof mine, child, &lone) == 0, "oob allgather: %s", tether_last_error());
    OK(tether_cancel((tether_request_t*)lone, NULL));
    st = tether_oob_req_test(lone);
    EXPECT(st == TETHER_OOB_ERR_NO_MESSAGE,
           "cancelled oob allgather: req_test returned %d, not UCC_ERR_NO_MESSAGE (-6)", st);
    EXPECT(tether_oob_req_free(lone) == 0, "oob req_free");
  }
  OK(tether_barrier(comm));
  OK(tether_finalize(child));
  OK(tether_finalize(comm));
  return 0;
}
