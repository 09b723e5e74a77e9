/* capi_ranks.c — the C ABI's operations on forked ranks, from C11. */
#define _POSIX_C_SOURCE 200809L

#include "capi_ranks.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "capi_check.h"

enum { kMaxRanks = 16 };

static int log_lines;
static void count_lines(tether_log_level_t level, const char* line, void* context) {
  (void)level;
  (void)line;
  *(int*)context += 1;
}

int capi_collectives(int rank, int nranks, const tether_unique_id_t* id, char* err, size_t errlen) {
  EXPECT(nranks <= kMaxRanks, "at most %d ranks", kMaxRanks);
  tether_options_t options;
  tether_options_init(&options);
  options.timeout_ms = 30000;
  if (rank == 0) {
    OK(tether_set_log_handler(count_lines, &log_lines));
    OK(tether_set_log_level(TETHER_LOG_INFO));
  }
  tether_comm_t* comm = NULL;
  OK(tether_init(rank, nranks, id, &options, &comm));
  if (rank == 0) {
    OK(tether_set_log_handler(NULL, NULL));
    OK(tether_set_log_level(TETHER_LOG_WARN));
    EXPECT(log_lines > 0, "the C log handler saw no INFO line during init");
  }
  int r = -1, n = -1, per_node = -1;
  int64_t timeout = 0;
  OK(tether_comm_rank(comm, &r));
  OK(tether_comm_size(comm, &n));
  OK(tether_comm_nranks_per_node(comm, &per_node));
  OK(tether_get_timeout(comm, &timeout));
  EXPECT(r == rank && n == nranks, "rank/size %d/%d, expected %d/%d", r, n, rank, nranks);
  EXPECT(per_node == nranks, "all ranks run on this host, nranks_per_node is %d", per_node);
  EXPECT(timeout == 30000, "timeout %lld, expected the option's 30000", (long long)timeout);

  /* topology: one host, so one node */
  int world_rank = -1, local = -1, node = -1, nnodes = -1;
  OK(tether_comm_world_rank(comm, &world_rank));
  OK(tether_comm_local_rank(comm, &local));
  OK(tether_comm_node_id(comm, &node));
  OK(tether_comm_nnodes(comm, &nnodes));
  EXPECT(world_rank == rank && local == rank && node == 0 && nnodes == 1, "topology world %d local %d node %d of %d",
         world_rank, local, node, nnodes);
  char mine[64], peer[64], tiny[2];
  OK(tether_comm_peer_address(comm, rank, mine, sizeof mine));
  OK(tether_comm_peer_address(comm, (rank + 1) % nranks, peer, sizeof peer));
  EXPECT(nranks == 1 || strcmp(mine, peer) != 0, "two ranks with one address %s", mine);
  OK(tether_comm_peer_host(comm, rank, mine, sizeof mine));
  EXPECT(strchr(mine, ':') == NULL || strchr(mine, '.') == NULL, "host '%s' has a port", mine);
  EXPECT(tether_comm_peer_host(comm, rank, tiny, sizeof tiny) == TETHER_ERR_INVALID_ARGUMENT,
         "a 2-byte buffer took the host");
  EXPECT(strstr(tether_last_error(), "bytes needed") != NULL, "buffer message: %s", tether_last_error());

  /* allgather: block r holds 1000 * r + 7 */
  long all[kMaxRanks];
  for (int i = 0; i < nranks; ++i) all[i] = -1;
  all[rank] = 1000L * rank + 7;
  OK(tether_allgather(comm, all, sizeof(long)));
  for (int i = 0; i < nranks; ++i) EXPECT(all[i] == 1000L * i + 7, "allgather block %d is %ld", i, all[i]);

  /* alltoall: block to j says (me, j) */
  int sendv[kMaxRanks], recvv[kMaxRanks];
  for (int j = 0; j < nranks; ++j) sendv[j] = rank * 100 + j;
  OK(tether_alltoall(comm, sendv, recvv, sizeof(int)));
  for (int j = 0; j < nranks; ++j) EXPECT(recvv[j] == j * 100 + rank, "alltoall block %d is %d", j, recvv[j]);

  /* alltoallv: rank j gets (j + 1) bytes of value `rank` from each rank */
  size_t scount[kMaxRanks], sdispl[kMaxRanks], rcount[kMaxRanks], rdispl[kMaxRanks], soff = 0, roff = 0;
  unsigned char sbuf[kMaxRanks * (kMaxRanks + 1)], rbuf[kMaxRanks * (kMaxRanks + 1)];
  for (int j = 0; j < nranks; ++j) {
    scount[j] = (size_t)j + 1;
    sdispl[j] = soff;
    memset(sbuf + soff, rank, scount[j]);
    soff += scount[j];
    rcount[j] = (size_t)rank + 1;
    rdispl[j] = roff;
    roff += rcount[j];
  }
  OK(tether_alltoallv(comm, sbuf, scount, sdispl, rbuf, rcount, rdispl));
  for (int j = 0; j < nranks; ++j)
    for (size_t b = 0; b < rcount[j]; ++b)
      EXPECT(rbuf[rdispl[j] + b] == (unsigned char)j, "alltoallv byte %zu from rank %d is %d", b, j,
             rbuf[rdispl[j] + b]);

  /* broadcast from the last rank */
  char text[32] = "";
  if (rank == nranks - 1) strcpy(text, "from the last rank");
  OK(tether_broadcast(comm, text, sizeof text, nranks - 1));
  EXPECT(strcmp(text, "from the last rank") == 0, "broadcast gave '%s'", text);

  /* a ring of sends with two tags: FIFO per (peer, tag) */
  int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  for (int k = 0; k < 3; ++k) {
    int out = rank * 10 + k, in = -1;
    OK(tether_send(comm, &out, sizeof out, next, 5));
    OK(tether_recv(comm, &in, sizeof in, prev, 5));
    EXPECT(in == prev * 10 + k, "ring message %d from %d is %d", k, prev, in);
  }
  OK(tether_set_timeout(comm, 20000));
  OK(tether_get_timeout(comm, &timeout));
  EXPECT(timeout == 20000, "timeout after tether_set_timeout is %lld", (long long)timeout);
  OK(tether_barrier(comm));
  OK(tether_finalize(comm));
  return 0;
}

int capi_split(int rank, int nranks, const tether_unique_id_t* id, char* err, size_t errlen) {
  tether_comm_t* world = NULL;
  OK(tether_init(rank, nranks, id, NULL, &world));
  /* even and odd ranks, ordered by descending world rank; the last rank stays out */
  int color = rank == nranks - 1 ? TETHER_NO_COLOR : rank % 2;
  tether_comm_t* child = NULL;
  OK(tether_split(world, color, nranks - rank, &child));
  if (color == TETHER_NO_COLOR) {
    EXPECT(child == NULL, "TETHER_NO_COLOR gave a child communicator");
  } else {
    EXPECT(child != NULL, "no child communicator for color %d", color);
    int cr = -1, cn = -1;
    OK(tether_comm_rank(child, &cr));
    OK(tether_comm_size(child, &cn));
    int members = 0;
    for (int i = 0; i < nranks - 1; ++i) members += i % 2 == color;
    EXPECT(cn == members, "child of color %d has %d ranks, expected %d", color, cn, members);
    int worlds[kMaxRanks];
    worlds[cr] = rank;
    OK(tether_allgather(child, worlds, sizeof(int)));
    for (int i = 1; i < cn; ++i)
      EXPECT(worlds[i - 1] > worlds[i], "child ranks are not in descending world order: %d then %d", worlds[i - 1],
             worlds[i]);
  }
  /* subset barrier of the first and the last rank, the others carry on */
  int ends[2] = {nranks - 1, 0};
  if (rank == 0 || rank == nranks - 1) OK(tether_barrier_subset(world, ends, 2));
  /* the child outlives its parent */
  OK(tether_barrier(world));
  OK(tether_finalize(world));
  if (child) {
    OK(tether_barrier(child));
    OK(tether_finalize(child));
  }
  return 0;
}

int capi_from_env(int rank, int nranks, const tether_unique_id_t* id, char* err, size_t errlen) {
  char text[TETHER_UNIQUE_ID_STRING_BYTES], number[16];
  OK(tether_unique_id_to_string(id, text, sizeof text));
  EXPECT(strlen(text) == 256, "unique id text has %zu characters", strlen(text));
  EXPECT(setenv("TETHER_UID", text, 1) == 0, "setenv TETHER_UID");
  snprintf(number, sizeof number, "%d", rank);
  EXPECT(setenv("TETHER_RANK", number, 1) == 0, "setenv TETHER_RANK");
  snprintf(number, sizeof number, "%d", nranks);
  EXPECT(setenv("TETHER_NRANKS", number, 1) == 0, "setenv TETHER_NRANKS");
  tether_comm_t* comm = NULL;
  OK(tether_init_from_env(NULL, &comm));
  int r = -1;
  OK(tether_comm_rank(comm, &r));
  EXPECT(r == rank, "rank from the environment is %d, expected %d", r, rank);
  int all[kMaxRanks];
  all[rank] = rank * rank;
  OK(tether_allgather(comm, all, sizeof(int)));
  for (int i = 0; i < nranks; ++i) EXPECT(all[i] == i * i, "allgather block %d is %d", i, all[i]);
  OK(tether_finalize(comm));
  return 0;
}
