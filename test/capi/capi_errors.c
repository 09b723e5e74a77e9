/* capi_errors.c — the C ABI's error paths, from C11: every failure is a result
 * code and a message from tether_last_error(), never a crash or a hang. */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <string.h>

#include "capi_check.h"
#include "capi_ranks.h"

int capi_local(char* err, size_t errlen) {
  EXPECT(tether_version() == TETHER_VERSION, "tether_version() %d, header says %d", tether_version(), TETHER_VERSION);
  EXPECT(strcmp(tether_version_string(), TETHER_VERSION_STRING) == 0, "version string %s", tether_version_string());
  EXPECT(strcmp(tether_result_string(TETHER_ERR_PEER_LOST), "TETHER_ERR_PEER_LOST") == 0, "result string");
  EXPECT(strcmp(tether_result_string((tether_result_t)42), "TETHER_ERR_UNKNOWN") == 0, "unknown result string");

  /* ids: create, text round trip, validation */
  tether_unique_id_t id, back;
  char text[TETHER_UNIQUE_ID_STRING_BYTES];
  OK(tether_unique_id_create_at("127.0.0.1:0", &id));
  OK(tether_unique_id_to_string(&id, text, sizeof text));
  OK(tether_unique_id_from_string(text, &back));
  EXPECT(memcmp(id.bytes, back.bytes, sizeof id.bytes) == 0, "the id changed in a text round trip");
  FAILS(tether_unique_id_to_string(&id, text, 100), TETHER_ERR_INVALID_ARGUMENT, "buf_size 100");
  text[200] = text[200] == '0' ? '1' : '0';
  FAILS(tether_unique_id_from_string(text, &back), TETHER_ERR_INVALID_ARGUMENT, "checksum");
  FAILS(tether_unique_id_from_string("not an id", &back), TETHER_ERR_INVALID_ARGUMENT, "hex characters");
  FAILS(tether_unique_id_from_string(NULL, &back), TETHER_ERR_INVALID_ARGUMENT, "text is NULL");
  FAILS(tether_unique_id_from_root("127.0.0.1", &back), TETHER_ERR_INVALID_ARGUMENT, "127.0.0.1");
  OK(tether_unique_id_from_root("127.0.0.1:29500", &back));
  OK(tether_unique_id_forget(&id));

  /* NULL handles and out-pointers are named, never dereferenced */
  int value = 0;
  FAILS(tether_comm_rank(NULL, &value), TETHER_ERR_INVALID_ARGUMENT, "tether_comm_rank: comm is NULL");
  FAILS(tether_allgather(NULL, &value, sizeof value), TETHER_ERR_INVALID_ARGUMENT, "tether_allgather: comm is NULL");
  FAILS(tether_barrier(NULL), TETHER_ERR_INVALID_ARGUMENT, "tether_barrier: comm is NULL");
  FAILS(tether_abort(NULL, "x"), TETHER_ERR_INVALID_ARGUMENT, "tether_abort: comm is NULL");
  FAILS(tether_init(0, 1, NULL, NULL, NULL), TETHER_ERR_INVALID_ARGUMENT, "tether_init: comm is NULL");
  OK(tether_finalize(NULL));
  /* a successful call leaves the last error alone */
  EXPECT(strstr(tether_last_error(), "tether_init: comm is NULL") != NULL, "last error changed by a success: %s",
         tether_last_error());

  /* a bad rank fails before any network traffic; *comm is NULL afterwards */
  tether_comm_t* comm = (tether_comm_t*)&value;
  FAILS(tether_init(5, 4, &back, NULL, &comm), TETHER_ERR_INVALID_ARGUMENT, "rank 5 of 4");
  EXPECT(comm == NULL, "tether_init left *comm set after a failure");
  FAILS(tether_init(-1, 4, &back, NULL, &comm), TETHER_ERR_INVALID_ARGUMENT, "rank -1 of 4");
  tether_options_t options;
  memset(&options, 0, sizeof options);
  FAILS(tether_init(0, 1, &back, &options, &comm), TETHER_ERR_INVALID_ARGUMENT, "struct_size is 0");
  tether_options_init(&options);
  options.timeout_ms = -5;
  FAILS(tether_init(0, 1, &back, &options, &comm), TETHER_ERR_INVALID_ARGUMENT, "timeout_ms -5");
  FAILS(tether_set_log_level((tether_log_level_t)9), TETHER_ERR_INVALID_ARGUMENT, "level 9");
  return 0;
}

int capi_bad_arguments(int rank, int nranks, const tether_unique_id_t* id, char* err, size_t errlen) {
  tether_comm_t* comm = NULL;
  OK(tether_init(rank, nranks, id, NULL, &comm));
  char rank_text[16];
  snprintf(rank_text, sizeof rank_text, "rank %d", rank);
  int block[8] = {0};
  size_t counts[8] = {0};
  FAILS(tether_allgather(comm, NULL, 8), TETHER_ERR_INVALID_ARGUMENT, rank_text);
  FAILS(tether_allgather(comm, NULL, 8), TETHER_ERR_INVALID_ARGUMENT, "allgather");
  FAILS(tether_alltoall(comm, block, NULL, sizeof(int)), TETHER_ERR_INVALID_ARGUMENT, "alltoall");
  FAILS(tether_alltoallv(comm, block, NULL, counts, block, counts, counts), TETHER_ERR_INVALID_ARGUMENT,
        "send_counts is NULL");
  FAILS(tether_send(comm, NULL, 4, 0, 1), TETHER_ERR_INVALID_ARGUMENT, "send");
  FAILS(tether_send(comm, block, 4, 99, 1), TETHER_ERR_INVALID_ARGUMENT, "peer 99");
  FAILS(tether_recv(comm, block, 4, -3, 1), TETHER_ERR_INVALID_ARGUMENT, "peer -3");
  FAILS(tether_send(comm, block, 4, 0, -1), TETHER_ERR_INVALID_ARGUMENT, "negative tag");
  FAILS(tether_broadcast(comm, block, 4, nranks), TETHER_ERR_INVALID_ARGUMENT, "broadcast");
  /* sizes whose total overflows: rejected before a byte is sent, no peer blamed */
  FAILS(tether_allgather(comm, block, SIZE_MAX / 2 + 2), TETHER_ERR_INVALID_ARGUMENT, "overflows size_t");
  FAILS(tether_alltoall(comm, block, block, SIZE_MAX / 2 + 2), TETHER_ERR_INVALID_ARGUMENT, "overflows size_t");
  {
    size_t big_displs[8] = {0};
    size_t one[8] = {0};
    for (int i = 0; i < nranks; ++i) one[i] = 1;
    big_displs[nranks - 1] = SIZE_MAX;
    FAILS(tether_alltoallv(comm, block, one, big_displs, block + 4, one, one), TETHER_ERR_INVALID_ARGUMENT,
          "overflows size_t");
  }
  FAILS(tether_broadcast(comm, block, SIZE_MAX - 8, 0), TETHER_ERR_INVALID_ARGUMENT, "address space");
  {
    void* none = NULL;
    EXPECT(tether_oob_allgather(block, block, SIZE_MAX / 2 + 2, comm, &none) == TETHER_OOB_ERR_INVALID_PARAM &&
               none == NULL,
           "oob allgather with an overflowing size: %s", tether_last_error());
  }
  FAILS(tether_barrier_subset(comm, NULL, 2), TETHER_ERR_INVALID_ARGUMENT, "ranks is NULL");
  FAILS(tether_set_timeout(comm, -5), TETHER_ERR_INVALID_ARGUMENT, "timeout_ms -5 is negative");
  /* 0 restores the default (TETHER_TIMEOUT_MS=20000 in this test), as configuration.md says */
  int64_t timeout = 0;
  OK(tether_set_timeout(comm, 1234));
  OK(tether_set_timeout(comm, 0));
  OK(tether_get_timeout(comm, &timeout));
  EXPECT(timeout == 20000, "timeout after tether_set_timeout(0) is %lld, not the default", (long long)timeout);
  FAILS(tether_comm_rank(comm, NULL), TETHER_ERR_INVALID_ARGUMENT, "rank is NULL");
  FAILS(tether_split(comm, 0, 0, NULL), TETHER_ERR_INVALID_ARGUMENT, "child is NULL");
  /* rejected arguments do not spoil the communicator */
  block[rank] = rank + 1;
  OK(tether_allgather(comm, block, sizeof(int)));
  for (int i = 0; i < nranks; ++i) EXPECT(block[i] == i + 1, "allgather after bad calls: block %d is %d", i, block[i]);
  OK(tether_finalize(comm));
  return 0;
}

int capi_timeout(int rank, int nranks, const tether_unique_id_t* id, char* err, size_t errlen) {
  tether_comm_t* comm = NULL;
  OK(tether_init(rank, nranks, id, NULL, &comm));
  if (rank == 1) {
    /* rank 0 never sends with tag 7 */
    int value = 0;
    OK(tether_set_timeout(comm, 300));
    FAILS(tether_recv(comm, &value, sizeof value, 0, 7), TETHER_ERR_TIMEOUT, "rank 1");
    EXPECT(strstr(tether_last_error(), "timed out") != NULL, "timeout message: %s", tether_last_error());
    OK(tether_set_timeout(comm, 30000));
  }
  /* a timed-out receive leaves the communicator usable */
  OK(tether_barrier(comm));
  OK(tether_finalize(comm));
  return 0;
}

int capi_abort(int rank, int nranks, const tether_unique_id_t* id, char* err, size_t errlen) {
  tether_comm_t* comm = NULL;
  OK(tether_init(rank, nranks, id, NULL, &comm));
  OK(tether_barrier(comm));
  /* Rank 1 aborts only once every other rank is past that barrier: its own
     barrier may return while another rank still waits for the release frame,
     and the abort would then (rightly) end that rank's first barrier. */
  int past = 1;
  if (rank == 1) {
    for (int r = 0; r < nranks; ++r)
      if (r != 1) OK(tether_recv(comm, &past, sizeof past, r, 11));
    OK(tether_abort(comm, "the C test gives up"));
    FAILS(tether_barrier(comm), TETHER_ERR_ABORTED, "aborted on this rank");
  } else {
    OK(tether_send(comm, &past, sizeof past, 1, 11));
    /* the others wait in a barrier rank 1 never joins: the notice ends it */
    FAILS(tether_barrier(comm), TETHER_ERR_ABORTED, "aborted by rank 1");
    EXPECT(strstr(tether_last_error(), "the C test gives up") != NULL, "abort reason missing: %s", tether_last_error());
  }
  OK(tether_finalize(comm));
  return 0;
}
