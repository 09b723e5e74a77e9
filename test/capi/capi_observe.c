/* capi_observe.c — init timings and counters from C11: tether_comm_init_timings
 * and tether_comm_counters, their struct_size, and counts after known calls. */
#define _POSIX_C_SOURCE 200809L

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "capi_check.h"
#include "capi_ranks.h"

int capi_observe(int rank, int nranks, const tether_unique_id_t* id, char* err, size_t errlen) {
  tether_comm_t *comm = NULL, *child = NULL;
  OK(tether_init(rank, nranks, id, NULL, &comm));

  tether_init_timings_t t;
  memset(&t, 0, sizeof t);
  FAILS(tether_comm_init_timings(comm, &t), TETHER_ERR_INVALID_ARGUMENT, "struct_size is 0");
  FAILS(tether_comm_init_timings(comm, NULL), TETHER_ERR_INVALID_ARGUMENT, "timings is NULL");
  t.struct_size = sizeof t;
  OK(tether_comm_init_timings(comm, &t));
  EXPECT(t.started_unix_us > INT64_C(1600000000) * 1000000, "started_unix_us %lld", (long long)t.started_unix_us);
  EXPECT(t.listen_us >= 0 && t.table_received_us >= t.listen_us && t.total_us >= t.table_received_us,
         "listen %lld, table %lld, total %lld", (long long)t.listen_us, (long long)t.table_received_us,
         (long long)t.total_us);
  EXPECT(t.first_link_us == TETHER_PHASE_ABSENT || t.first_link_us >= t.table_received_us, "first link %lld",
         (long long)t.first_link_us);

  /* A caller compiled against a shorter struct: only what it covers is written. */
  tether_counters_t c;
  memset(&c, 0xab, sizeof c);
  c.struct_size = offsetof(tether_counters_t, split);
  OK(tether_comm_counters(comm, &c));
  EXPECT(c.allgather == 0 && c.barrier_subset == 0, "fields inside struct_size are filled");
  EXPECT(c.split == UINT64_C(0xabababababababab) && c.struct_size == offsetof(tether_counters_t, split),
         "split (past struct_size) was written, or struct_size changed");

  /* One message of 100 bytes from rank 0 to rank 1 on a child: one frame and
   * 100 payload bytes on each side; the split is the parent's call. */
  OK(tether_split(comm, 0, rank, &child));
  unsigned char buf[100];
  memset(buf, rank, sizeof buf);
  if (rank == 0) OK(tether_send(child, buf, sizeof buf, 1, 3));
  if (rank == 1) OK(tether_recv(child, buf, sizeof buf, 0, 3));
  memset(&c, 0, sizeof c);
  c.struct_size = sizeof c;
  OK(tether_comm_counters(child, &c));
  if (rank == 0)
    EXPECT(c.send == 1 && c.recv == 0 && c.frames_sent == 1 && c.bytes_sent == 100 && c.frames_received == 0,
           "rank 0: send %llu, frames sent %llu, bytes sent %llu", (unsigned long long)c.send,
           (unsigned long long)c.frames_sent, (unsigned long long)c.bytes_sent);
  if (rank == 1)
    EXPECT(c.recv == 1 && c.send == 0 && c.frames_received == 1 && c.bytes_received == 100 && c.frames_sent == 0,
           "rank 1: recv %llu, frames received %llu, bytes received %llu", (unsigned long long)c.recv,
           (unsigned long long)c.frames_received, (unsigned long long)c.bytes_received);
  OK(tether_barrier(comm));
  OK(tether_barrier(comm));
  OK(tether_comm_counters(comm, &c));
  EXPECT(c.split == 1 && c.barrier == 2 && c.send == 0 && c.timeouts == 0 && c.aborts == 0,
         "parent: split %llu, barrier %llu", (unsigned long long)c.split, (unsigned long long)c.barrier);
  OK(tether_finalize(child));
  OK(tether_finalize(comm));
  return 0;
}
