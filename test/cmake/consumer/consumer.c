/* Every rank contributes one record; every rank gets all of them. */
#include <stdio.h>
#include <stdlib.h>

#include <tether/tether.h>

#define CHECK(call)                                                                            \
  do {                                                                                         \
    tether_result_t rc_ = (call);                                                              \
    if (rc_ != TETHER_SUCCESS) {                                                               \
      fprintf(stderr, "consumer_c: %s: %s\n", tether_result_string(rc_), tether_last_error()); \
      return 1;                                                                                \
    }                                                                                          \
  } while (0)

int main(void) {
  tether_comm_t* comm = NULL;
  int rank = 0, size = 0;
  /* Rank, size and root from the launcher (TETHER_RANK/TETHER_NRANKS/TETHER_UID_FILE, torchrun, mpirun, srun). */
  CHECK(tether_init_from_env(NULL, &comm));
  CHECK(tether_comm_rank(comm, &rank));
  CHECK(tether_comm_size(comm, &size));
  int* all = calloc((size_t)size, sizeof *all);
  if (!all) return 1;
  all[rank] = 100 + rank;
  CHECK(tether_allgather(comm, all, sizeof *all));
  for (int r = 0; r < size; ++r) {
    if (all[r] != 100 + r) {
      fprintf(stderr, "rank %d: block %d is %d\n", rank, r, all[r]);
      return 1;
    }
  }
  CHECK(tether_barrier(comm));
  printf("consumer_c: rank %d of %d: allgather ok (tether %s)\n", rank, size, tether_version_string());
  free(all);
  CHECK(tether_finalize(comm));
  return 0;
}
