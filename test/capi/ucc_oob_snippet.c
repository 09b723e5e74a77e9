/* UCC's out-of-band allgather over a tether communicator. */
#include <stddef.h>
#include <stdint.h>

#include "tether/tether.h"

/* The fields of UCC's ucc_oob_coll_t (ucc/api/ucc.h). With UCC's header, use
 * ucc_oob_coll_t and cast the three functions to its ucc_status_t pointer
 * types: the values agree (0 = UCC_OK, 1 = UCC_INPROGRESS, errors negative). */
struct oob_coll {
  int (*allgather)(void* sbuf, void* rbuf, size_t msglen, void* coll_info, void** req);
  int (*req_test)(void* req);
  int (*req_free)(void* req);
  void* coll_info;
  uint32_t n_oob_eps;
  uint32_t oob_ep;
};

void fill_oob(struct oob_coll* oob, tether_comm_t* comm) {
  int rank = 0, size = 0;
  tether_comm_rank(comm, &rank);
  tether_comm_size(comm, &size);
  oob->allgather = tether_oob_allgather;
  oob->req_test = tether_oob_req_test;
  oob->req_free = tether_oob_req_free;
  oob->coll_info = comm; /* the tether_comm_t is UCC's coll_info */
  oob->n_oob_eps = (uint32_t)size;
  oob->oob_ep = (uint32_t)rank;
}
